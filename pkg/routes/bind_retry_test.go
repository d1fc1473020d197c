package routes_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
)

// bindResult is a bind answer, or why there is none.
type bindResult struct {
	res extenderv1.ExtenderBindingResult
	err error
}

// bindAsync sends a bind with ctx as the request's context (the scheduler's side of the
// connection) and delivers the answer on the returned channel.
func (f *fixture) bindAsync(ctx context.Context, args extenderv1.ExtenderBindingArgs) <-chan bindResult {
	out := make(chan bindResult, 1)
	go func() {
		body, _ := json.Marshal(args)
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/gpushare-scheduler/bind", bytes.NewReader(body)).WithContext(ctx)
		f.h.Verbs().ServeHTTP(rec, req)
		var r bindResult
		if rec.Code != http.StatusOK {
			r.err = fmt.Errorf("bind status %d: %s", rec.Code, rec.Body)
		} else {
			r.err = json.Unmarshal(rec.Body.Bytes(), &r.res)
		}
		out <- r
	}()
	return out
}

// await waits for a bind's answer; a bind that does not answer in 5 s fails the test.
func await(t *testing.T, what string, ch <-chan bindResult) extenderv1.ExtenderBindingResult {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("%s: %v", what, r.err)
		}
		return r.res
	case <-time.After(5 * time.Second):
		t.Errorf("%s: no answer within 5s", what)
		return extenderv1.ExtenderBindingResult{Error: "no answer"}
	}
}

// bindingGate holds the first Binding call of one pod inside the API (the fake clientset)
// until open; later calls of that pod fail as a lost connection does. While it holds a call,
// every call to the fake clientset waits (the fake serialises its reactors), so a test must
// not read the clientset then.
type bindingGate struct {
	entered chan struct{} // closed when the first call arrives
	release chan struct{}
	once    sync.Once
	calls   atomic.Int32
}

func gateBinding(t *testing.T, f *fixture, pod string) *bindingGate {
	t.Helper()
	g := &bindingGate{entered: make(chan struct{}), release: make(chan struct{})}
	f.Client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "binding" || a.(k8stesting.CreateAction).GetObject().(*corev1.Binding).Name != pod {
			return false, nil, nil
		}
		if g.calls.Add(1) > 1 {
			return true, nil, errors.New("http2: client connection lost")
		}
		close(g.entered)
		<-g.release
		return false, nil, nil // the fixture's reactor binds the pod
	})
	t.Cleanup(g.open)
	return g
}

func (g *bindingGate) open() { g.once.Do(func() { close(g.release) }) }

func (g *bindingGate) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the first Binding call never reached the API")
	}
}

// reserved lists the reserved pods of a node by name (from the cache, not the API).
func reserved(f *fixture, node string) []string {
	n, _ := f.Cache.InspectNode(node)
	var out []string
	for _, c := range n.Cards {
		for _, p := range c.Pods {
			if p.Reserved {
				out = append(out, p.Name)
			}
		}
	}
	return out
}

func bindArgs(pod, node string) extenderv1.ExtenderBindingArgs {
	return extenderv1.ExtenderBindingArgs{PodName: pod, PodNamespace: "default", PodUID: types.UID("uid-" + pod), Node: node}
}

// TestBindRetryWhileBindingInFlight: the scheduler gives up on bind #1 while its Binding is
// still in the API server and retries. The card stays held by the pod (16 of 16) all along,
// another 16-unit pod does not fit meanwhile, and when bind #1's Binding lands the card
// holds 16, not 32.
func TestBindRetryWhileBindingInFlight(t *testing.T) {
	f := newFixture(t, ct.Node("n1", 16), ct.Pod("p", 16), ct.Pod("q", 16))
	g := gateBinding(t, f, "p")

	sched1, giveUp := context.WithCancel(context.Background())
	first := f.bindAsync(sched1, bindArgs("p", "n1"))
	g.waitEntered(t)
	giveUp() // the scheduler's httpTimeout: the Binding goes on, detached

	// The retry waits for bind #1's outcome only as long as its own request lasts.
	sched2, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if res := await(t, "retry", f.bindAsync(sched2, bindArgs("p", "n1"))); !strings.Contains(res.Error, "still in flight") {
		t.Errorf("retry while bind #1 is in flight: error %q, want it to say the Binding is still in flight", res.Error)
	}
	if got, want := summary(f, "n1"), "0:16/16"; got != want {
		t.Errorf("cards after the retry: %q, want %q (still held by p)", got, want)
	}
	// 16 + 16 > 16: q must not get the card p's Binding is landing on.
	if res := await(t, "bind q", f.bindAsync(context.Background(), bindArgs("q", "n1"))); !strings.Contains(res.Error, "need 16 on one card; largest free 0") {
		t.Errorf("bind q: error %q, want no fit", res.Error)
	}
	if got, want := summary(f, "n1"), "0:16/16"; got != want {
		t.Errorf("cards after bind q: %q, want %q", got, want)
	}

	g.open() // bind #1's Binding lands
	if res := await(t, "bind #1", first); res.Error != "" {
		t.Errorf("bind #1: %s", res.Error)
	}
	ct.Eventually(t, "p placed", func() bool { return len(reserved(f, "n1")) == 0 && summary(f, "n1") == "0:16/16" })
	// A late retry of the same bind is answered from the cache: no second Binding.
	if res := f.bind(t, bindArgs("p", "n1")); res.Error != "" {
		t.Errorf("retry after p was placed: %s", res.Error)
	}
	if d := cmp.Diff([]string{"p->n1"}, bindingsCreated(f)); d != "" {
		t.Errorf("Binding calls (-want,+got):\n%s", d)
	}
	if got, want := summary(f, "n1"), "0:16/16"; got != want {
		t.Errorf("cards at the end: %q, want %q", got, want)
	}
}

// TestBindRetryToAnotherNodeRefused: while the pod holds a card on n1 for a Binding that
// may still land, a bind of it to n2 is refused and takes nothing there.
func TestBindRetryToAnotherNodeRefused(t *testing.T) {
	f := newFixture(t, ct.Node("n1", 16), ct.Node("n2", 16), ct.Pod("p", 16))
	g := gateBinding(t, f, "p")
	first := f.bindAsync(context.Background(), bindArgs("p", "n1"))
	g.waitEntered(t)

	res := await(t, "bind to n2", f.bindAsync(context.Background(), bindArgs("p", "n2")))
	if want := "binding pod default/p to n2: pod holds cards on node n1 for an earlier bind whose Binding may still land"; res.Error != want {
		t.Errorf("bind to n2: error %q, want %q", res.Error, want)
	}
	if got, want := summary(f, "n1")+" | "+summary(f, "n2"), "0:16/16 | 0:0/16"; got != want {
		t.Errorf("cards %q, want %q", got, want)
	}
	g.open()
	if res := await(t, "bind #1", first); res.Error != "" {
		t.Errorf("bind #1: %s", res.Error)
	}
	ct.Eventually(t, "p placed on n1", func() bool { return len(reserved(f, "n1")) == 0 && summary(f, "n1") == "0:16/16" })
	if d := cmp.Diff([]string{"p->n1"}, bindingsCreated(f)); d != "" {
		t.Errorf("Binding calls (-want,+got):\n%s", d)
	}
	if got, want := summary(f, "n2"), "0:0/16"; got != want {
		t.Errorf("n2 at the end: %q, want %q", got, want)
	}
}

// TestBindSettlesFailedBinding: a failed Binding is resolved by reading the pod back. Cards
// are freed only when the pod is definitely not bound by them.
func TestBindSettlesFailedBinding(t *testing.T) {
	lost := errors.New("http2: client connection lost")
	tests := []struct {
		name string
		// binding runs instead of the API server's Binding; it may change the pod first.
		binding   func(f *fixture, b *corev1.Binding) error
		readFails bool   // the read-back fails too
		wantError string // exact; "" for success
		wantCards string // n1 once settled
		wantHeld  bool   // p still reserved (not placed, not freed)
	}{
		{
			name:      "connection lost, pod not bound: cards stay held",
			binding:   func(*fixture, *corev1.Binding) error { return lost },
			wantError: "binding pod default/p to n1: http2: client connection lost; outcome unknown, pod not bound yet (its cards stay held until the pod is seen bound or the reservation expires)",
			wantCards: "0:6/16", wantHeld: true,
		},
		{
			name: "timeout, but the Binding landed: bound",
			binding: func(f *fixture, b *corev1.Binding) error {
				if err := applyBinding(f.Env, b); err != nil {
					return err
				}
				return apierrors.NewTimeoutError("request did not complete within 30s", 0)
			},
			wantCards: "0:6/16",
		},
		{
			name: "server error and the read-back fails: cards stay held",
			binding: func(*fixture, *corev1.Binding) error {
				return apierrors.NewInternalError(errors.New("etcd leader changed"))
			},
			readFails: true,
			wantError: "binding pod default/p to n1: Internal error occurred: etcd leader changed; outcome unknown, reading the pod back failed: etcd is unavailable (its cards stay held until the pod is seen bound or the reservation expires)",
			wantCards: "0:6/16", wantHeld: true,
		},
		{
			name: "forbidden, pod not bound: freed",
			binding: func(*fixture, *corev1.Binding) error {
				return apierrors.NewForbidden(podsGVR.GroupResource(), "p", errors.New("quota"))
			},
			wantError: `binding pod default/p to n1: pods "p" is forbidden: quota (pod not bound; reservation released)`,
			wantCards: "0:0/16",
		},
		{
			name: "not found, pod deleted: freed",
			binding: func(f *fixture, b *corev1.Binding) error {
				if err := f.Client.Tracker().Delete(podsGVR, b.Namespace, b.Name); err != nil {
					return err
				}
				return apierrors.NewNotFound(podsGVR.GroupResource(), b.Name)
			},
			wantError: `binding pod default/p to n1: pods "p" not found (pod deleted; reservation released)`,
			wantCards: "0:0/16",
		},
		{
			name: "conflict, pod bound to another node: freed",
			binding: func(f *fixture, b *corev1.Binding) error {
				other := b.DeepCopy()
				other.Target.Name, other.Annotations = "n2", nil
				if err := applyBinding(f.Env, other); err != nil {
					return err
				}
				return applyBinding(f.Env, b) // 409: already assigned
			},
			wantError: `binding pod default/p to n1: Operation cannot be fulfilled on pods "p": pod p is already assigned to node "n2" (pod is bound to node n2 without this allocation; reservation released)`,
			wantCards: "0:0/16",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, ct.Node("n1", 16), ct.Pod("p", 6))
			f.Client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() != "binding" {
					return false, nil, nil
				}
				return true, nil, tc.binding(f, a.(k8stesting.CreateAction).GetObject().(*corev1.Binding))
			})
			if tc.readFails {
				f.Client.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewServiceUnavailable("etcd is unavailable")
				})
			}
			res := f.bind(t, bindArgs("p", "n1"))
			if res.Error != tc.wantError {
				t.Errorf("error\n got %q\nwant %q", res.Error, tc.wantError)
			}
			ct.Eventually(t, "cards "+tc.wantCards, func() bool {
				return summary(f, "n1") == tc.wantCards && (len(reserved(f, "n1")) > 0) == tc.wantHeld
			})
		})
	}
}

// TestBindRetryAfterUnknownOutcome: after a Binding whose outcome is unknown, the retry
// re-issues it on the same cards with the same annotations (assume time included), and
// the cards are held once throughout.
func TestBindRetryAfterUnknownOutcome(t *testing.T) {
	f := newFixture(t, ct.Node("n1", 16, 16), ct.Pod("p", 6))
	var calls atomic.Int32
	f.Client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "binding" && calls.Add(1) == 1 {
			return true, nil, errors.New("http2: client connection lost")
		}
		return false, nil, nil
	})
	if res := f.bind(t, bindArgs("p", "n1")); !strings.Contains(res.Error, "outcome unknown") {
		t.Fatalf("bind #1: error %q, want an unknown outcome", res.Error)
	}
	if got, want := summary(f, "n1"), "0:6/16 1:0/16"; got != want {
		t.Errorf("after bind #1: %q, want %q (held)", got, want)
	}
	f.Clock.Step(30 * time.Second) // within the TTL
	if res := f.bind(t, bindArgs("p", "n1")); res.Error != "" {
		t.Fatalf("retry: %s", res.Error)
	}
	var sent []*corev1.Binding
	for _, a := range f.Client.Actions() {
		if a.GetVerb() == "create" && a.GetSubresource() == "binding" {
			sent = append(sent, a.(k8stesting.CreateAction).GetObject().(*corev1.Binding))
		}
	}
	if len(sent) != 2 {
		t.Fatalf("%d Binding calls, want 2", len(sent))
	}
	if d := cmp.Diff(sent[0].Annotations, sent[1].Annotations); d != "" {
		t.Errorf("re-issued Binding's annotations differ (-first,+retry):\n%s", d)
	}
	ct.Eventually(t, "p placed", func() bool { return len(reserved(f, "n1")) == 0 && summary(f, "n1") == "0:6/16 1:0/16" })
}

// TestFilterWhileHeld: while an earlier bind of the pod holds cards on n1, filter offers only
// n1 (where a retried bind reuses the cards), even though n1 is full and n2 empty.
func TestFilterWhileHeld(t *testing.T) {
	f := newFixture(t, ct.Node("n1", 16), ct.Node("n2", 16), ct.Pod("p", 16))
	g := gateBinding(t, f, "p")
	first := f.bindAsync(context.Background(), bindArgs("p", "n1"))
	g.waitEntered(t)

	names := []string{"n1", "n2"}
	rec := f.do(t, http.MethodPost, "/gpushare-scheduler/filter", extenderv1.ExtenderArgs{Pod: ct.Pod("p", 16), NodeNames: &names})
	var got extenderv1.ExtenderFilterResult
	decodeInto(t, rec, &got)
	want := extenderv1.ExtenderFilterResult{
		NodeNames:                  &[]string{"n1"},
		FailedNodes:                extenderv1.FailedNodesMap{"n2": "an earlier bind of this pod to node n1 holds its cards and may still land"},
		FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("filter while held (-want,+got):\n%s", d)
	}
	g.open()
	if res := await(t, "bind #1", first); res.Error != "" {
		t.Errorf("bind #1: %s", res.Error)
	}
}

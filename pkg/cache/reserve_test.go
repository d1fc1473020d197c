package cache_test

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpushare/gpushare/pkg/cache"
	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
)

// held lists "name:units@card" of the reservations on a node, sorted.
func held(c *cache.Cache, node string) []string {
	n, _ := c.InspectNode(node)
	var out []string
	for _, card := range n.Cards {
		for _, p := range card.Pods {
			if p.Reserved {
				out = append(out, p.Name+":"+strconv.FormatInt(p.Units, 10)+"@"+strconv.Itoa(card.Index))
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestReserveRetries: a second Reserve for a pod that holds cards never replaces them.
func TestReserveRetries(t *testing.T) {
	env := ct.Start(t, time.Minute, ct.Node("n1", 16), ct.Node("n2", 16))
	pol := binpack(t)
	pod := ct.Pod("p", 16)
	req := request(t, pod)
	ctx := context.Background()

	first, err := env.Cache.Reserve(ctx, "n1", pod, req, pol)
	if err != nil {
		t.Fatal(err)
	}
	// In flight: a retry on the same node waits, bounded by its context.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := env.Cache.Reserve(short, "n1", pod, req, pol); !errors.Is(err, cache.ErrBindInFlight) {
		t.Fatalf("retry while in flight: %v, want ErrBindInFlight", err)
	}
	// Another node is refused, in flight or not.
	var elsewhere *cache.HeldElsewhereError
	if _, err := env.Cache.Reserve(ctx, "n2", pod, req, pol); !errors.As(err, &elsewhere) || elsewhere.Node != "n1" {
		t.Fatalf("retry on n2: %v, want HeldElsewhereError{n1}", err)
	}
	// 16 of 16 held on n1 once, nothing on n2.
	if got, want := cards(env.Cache, "n1")+" "+cards(env.Cache, "n2"), "0:16/16 0:0/16"; got != want {
		t.Fatalf("cards %q, want %q", got, want)
	}

	// A waiting retry goes on when the first call ends with its outcome unknown: it reuses
	// the same cards, with the same assume time, to re-issue the Binding.
	env.Clock.Step(10 * time.Second)
	type result struct {
		r   cache.Reservation
		err error
	}
	got := make(chan result, 1)
	go func() {
		r, err := env.Cache.Reserve(ctx, "n1", pod, req, pol)
		got <- result{r, err}
	}()
	ct.Eventually(t, "the retry waits for the first call's outcome", func() bool {
		return env.Cache.RetriesWaiting(pod.UID) == 1
	})
	env.Cache.Finish(first, cache.BindUnknown)
	second := <-got
	if second.err != nil {
		t.Fatal(second.err)
	}
	if !second.r.Reused || second.r.Landed || !second.r.Since.Equal(ct.Epoch) ||
		!cmp.Equal(second.r.CardUnits, first.CardUnits) || !cmp.Equal(second.r.Placement, first.Placement) {
		t.Errorf("retry after unknown outcome: %+v, want the first's cards (%+v) reused", second.r, first)
	}
	if got, want := cards(env.Cache, "n1"), "0:16/16"; got != want {
		t.Errorf("after reuse: cards %q, want %q", got, want)
	}

	// The re-issued call lands: a further retry has nothing to write.
	env.Cache.Finish(second.r, cache.BindLanded)
	third, err := env.Cache.Reserve(ctx, "n1", pod, req, pol)
	if err != nil || !third.Landed {
		t.Fatalf("retry after landed: %+v, %v; want Landed", third, err)
	}
	env.Cache.Finish(third, cache.BindRefused) // allowed no call: does nothing
	if got, want := cards(env.Cache, "n1"), "0:16/16"; got != want {
		t.Errorf("after landed: cards %q, want %q", got, want)
	}
}

// TestReserveAfterRefusal: a refused Binding frees the cards, and the next bind of the pod
// chooses afresh (another node too).
func TestReserveAfterRefusal(t *testing.T) {
	env := ct.Start(t, time.Minute, ct.Node("n1", 16), ct.Node("n2", 16))
	pol := binpack(t)
	pod := ct.Pod("p", 16)
	req := request(t, pod)
	first, err := env.Cache.Reserve(context.Background(), "n1", pod, req, pol)
	if err != nil {
		t.Fatal(err)
	}
	env.Cache.Finish(first, cache.BindRefused)
	r, err := env.Cache.Reserve(context.Background(), "n2", pod, req, pol)
	if err != nil || r.Reused {
		t.Fatalf("reserve after refusal: %+v, %v", r, err)
	}
	if got, want := cards(env.Cache, "n1")+" "+cards(env.Cache, "n2"), "0:0/16 0:16/16"; got != want {
		t.Errorf("cards %q, want %q", got, want)
	}
}

// TestExpiryConfirmsUnbound: past the TTL a hold is dropped only when no Binding call is
// in flight and the API server shows its pod not bound by it.
func TestExpiryConfirmsUnbound(t *testing.T) {
	const ttl = time.Minute
	// Every pod takes 2 units; binpack puts all eight on card 0 (16 units).
	names := []string{"inflight", "unbound", "gone", "elsewhere", "boundhere", "landed", "readfails", "recreated"}
	objs := []runtime.Object{ct.Node("n1", 16, 16)}
	for _, n := range names {
		if n != "gone" {
			objs = append(objs, ct.Pod(n, 2))
		}
	}
	env := ct.Start(t, ttl, objs...)
	// The informer never sees these changes: only fresh reads do.
	bound := func(name, node string) runtime.Object {
		p := ct.Pod(name, 2)
		p.Spec.NodeName = node
		return p
	}
	env.Client.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		name := a.(k8stesting.GetAction).GetName()
		switch name {
		case "elsewhere":
			return true, bound(name, "n2"), nil
		case "boundhere", "landed":
			return true, bound(name, "n1"), nil
		case "readfails":
			return true, nil, apierrors.NewServiceUnavailable("etcd leader election")
		case "recreated":
			p := ct.Pod(name, 2)
			p.UID = "uid-new"
			return true, p, nil
		}
		return false, nil, nil
	})
	pol := binpack(t)
	rsv := map[string]cache.Reservation{}
	for _, n := range names {
		pod := ct.Pod(n, 2)
		r, err := env.Cache.Reserve(context.Background(), "n1", pod, request(t, pod), pol)
		if err != nil {
			t.Fatal(err)
		}
		rsv[n] = r
		switch n {
		case "inflight": // its Binding call has not returned
		case "landed":
			env.Cache.Finish(r, cache.BindLanded)
		default:
			env.Cache.Finish(r, cache.BindUnknown)
		}
	}
	if got, want := cards(env.Cache, "n1"), "0:16/16 1:0/16"; got != want {
		t.Fatalf("before expiry: %q, want %q", got, want)
	}
	// Before the TTL nothing goes, whatever the API server says.
	env.Clock.Step(ttl - time.Second)
	env.Cache.ExpireNow(t.Context())
	if got, want := cards(env.Cache, "n1"), "0:16/16 1:0/16"; got != want {
		t.Errorf("before the TTL: %q, want %q", got, want)
	}
	// Past it: unbound, not found, bound to another node and re-created go (2 units each);
	// in flight, bound here (left to the informer), landed and an unreadable pod stay.
	want := []string{"boundhere:2@0", "inflight:2@0", "landed:2@0", "readfails:2@0"}
	ct.Eventually(t, "holds confirmed unbound dropped", func() bool {
		env.Clock.Step(ttl / 4)
		return cmp.Equal(held(env.Cache, "n1"), want)
	})
	for i := 0; i < 3; i++ { // more passes change nothing
		env.Clock.Step(ttl)
		env.Cache.ExpireNow(t.Context())
	}
	if d := cmp.Diff(want, held(env.Cache, "n1")); d != "" {
		t.Errorf("holds after more passes (-want,+got):\n%s", d)
	}
	if got, want := cards(env.Cache, "n1"), "0:8/16 1:0/16"; got != want {
		t.Errorf("after expiry: %q, want %q", got, want)
	}
	// The in-flight call ends unknown; the pod is still unbound: the next pass drops it.
	env.Cache.Finish(rsv["inflight"], cache.BindUnknown)
	ct.Eventually(t, "hold of the finished call dropped", func() bool {
		env.Clock.Step(ttl / 4)
		return cards(env.Cache, "n1") == "0:6/16 1:0/16"
	})
}

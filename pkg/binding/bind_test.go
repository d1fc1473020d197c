package binding_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/gpushare/gpushare/pkg/binding"
	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/metrics"
	"github.com/gpushare/gpushare/pkg/policy"
)

// assumeTime is the assume-time annotation of a bind whose cards were held at epoch.
var assumeTime = strconv.FormatInt(epoch.UnixNano(), 10)

func TestBindWritesTheBindingOfTheCardsThePolicyChose(t *testing.T) {
	tests := []struct {
		name      string
		pod       *corev1.Pod
		node      string
		want      map[string]string  // the Binding's annotations
		wantUsage gpushare.CardUnits // what the ledger counts for the pod; nil: nothing
		wantHold  string
	}{
		{
			// Nothing to hold: a plain Binding, and the ledger never hears of the pod.
			name: "pod requesting nothing gets a Binding without annotations",
			pod:  pod("plain", 0, 0), node: "hetero",
			wantHold: released,
		},
		{
			// binpack: best fit, 6 on the 8-unit card 1.
			name: "one card: its index and size annotated, held in the ledger",
			pod:  pod("single", 6, 0), node: "hetero",
			want: map[string]string{
				gpushare.AnnotationAllocation: `{"0":{"1":6}}`, gpushare.AnnotationPodUnits: "6",
				gpushare.AnnotationAssigned: "false", gpushare.AnnotationAssumeTime: assumeTime,
				gpushare.AnnotationIndex: "1", gpushare.AnnotationDevUnits: "8", gpushare.AnnotationUnit: "GiB",
			},
			wantUsage: gpushare.CardUnits{1: 6}, wantHold: landed,
		},
		{
			// 16 over 2 cards: 8 on each of cards 0 and 1; no single-card index or size.
			name: "two cards: the allocation alone, held in the ledger",
			pod:  pod("multi", 16, 2), node: "big",
			want: map[string]string{
				gpushare.AnnotationAllocation: `{"0":{"0":8,"1":8}}`, gpushare.AnnotationPodUnits: "16",
				gpushare.AnnotationAssigned: "false", gpushare.AnnotationAssumeTime: assumeTime,
				gpushare.AnnotationUnit: "GiB",
			},
			wantUsage: gpushare.CardUnits{0: 8, 1: 8}, wantHold: landed,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil, node("hetero", 16, 8), node("big", 16, 16, 16), tc.pod)
			if err := e.bind(context.Background(), t, tc.pod, tc.node); err != nil {
				t.Fatalf("Bind: %v", err)
			}
			bs := e.bindings()
			if len(bs) != 1 {
				t.Fatalf("%d Bindings sent, want 1", len(bs))
			}
			b := bs[0]
			if b.Name != tc.pod.Name || b.Namespace != tc.pod.Namespace || b.UID != tc.pod.UID || b.Target.Kind != "Node" || b.Target.Name != tc.node {
				t.Errorf("Binding %s/%s uid %q → %s %s, want %s/%s uid %q → Node %s",
					b.Namespace, b.Name, b.UID, b.Target.Kind, b.Target.Name, tc.pod.Namespace, tc.pod.Name, tc.pod.UID, tc.node)
			}
			if d := cmp.Diff(tc.want, b.Annotations); d != "" {
				t.Errorf("Binding annotations (-want +got):\n%s", d)
			}
			node, usage, counted := e.cache.Counted(tc.pod.UID)
			switch {
			case tc.wantUsage == nil && counted:
				t.Errorf("the ledger counts %v on %s for a pod that requests nothing", usage, node)
			case tc.wantUsage != nil && (node != tc.node || !cmp.Equal(usage, tc.wantUsage)):
				t.Errorf("the ledger counts %v on %q (counted %v), want %v on %s", usage, node, counted, tc.wantUsage, tc.node)
			}
			if got := e.hold(t, tc.pod); got != tc.wantHold {
				t.Errorf("hold %s, want %s", got, tc.wantHold)
			}
			if n := e.count("get", ""); n != 0 {
				t.Errorf("%d pod reads after a Binding that succeeded, want none", n)
			}
		})
	}
}

// A pod that requests nothing is never held, so its Binding is not settled: a failure is
// the answer, with nothing read back. Its write runs on the same deadline as any other,
// detached from the caller and within the Lease.
func TestBindOfAPodRequestingNothing(t *testing.T) {
	gone, cancel := context.WithDeadline(context.Background(), epoch) // long past
	defer cancel()
	tests := []struct {
		name       string
		ctx        context.Context // the caller's; nil: Background
		bindErr    error
		lease      *lease
		wantWrite  time.Duration // the Binding's deadline; 0: no Binding
		wantEvents []string
		wantLabel  string // "": Bind succeeds
	}{
		{
			name: "caller gone: bound within the Lease all the same", ctx: gone, lease: &lease{left: 2 * time.Second},
			wantWrite: 2 * time.Second, wantEvents: []string{"lease begin", "bind", "lease done"},
		},
		{
			name:      "Binding refused: binding failure",
			bindErr:   apierrors.NewConflict(podsGVR.GroupResource(), "plain", errors.New("already bound")),
			wantWrite: binding.DefaultBindTimeout, wantEvents: []string{"bind"}, wantLabel: metrics.BindBinding,
		},
		{
			name:      "Binding times out: binding failure, not unknown (nothing is held)",
			bindErr:   apierrors.NewServerTimeout(podsGVR.GroupResource(), "create", 1),
			wantWrite: binding.DefaultBindTimeout, wantEvents: []string{"bind"}, wantLabel: metrics.BindBinding,
		},
		{
			name:  "Lease refuses: lease failure before any write",
			lease: &lease{err: errors.New("not the leader")}, wantEvents: []string{"lease begin"}, wantLabel: metrics.BindLease,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := pod("plain", 0, 0)
			e := newEnv(t, &api{bindErrs: []error{tc.bindErr}}, node("n1", 16), p)
			if tc.lease != nil {
				tc.lease.calls = e.calls
				e.binder.Lease = tc.lease
			}
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			before := time.Now()
			err := e.bind(ctx, t, p, "n1")
			after := time.Now()
			if tc.wantLabel == "" {
				if err != nil {
					t.Fatalf("Bind: %v", err)
				}
			} else if be := asError(t, err); be.Label != tc.wantLabel {
				t.Errorf("label %q, want %q (%v)", be.Label, tc.wantLabel, err)
			}
			if tc.bindErr != nil && !errors.Is(err, tc.bindErr) {
				t.Errorf("Bind: %v does not wrap the Binding's error", err)
			}
			if d := cmp.Diff(tc.wantEvents, e.calls.log()); d != "" {
				t.Errorf("calls (-want +got):\n%s", d)
			}
			if tc.wantWrite > 0 {
				deadlineIs(t, "Binding", e.calls.ctx("bind"), before, after, tc.wantWrite)
			}
			if _, _, counted := e.cache.Counted(p.UID); counted {
				t.Error("the ledger counts a pod that requests nothing")
			}
		})
	}
}

// A retry of a pod that holds cards never chooses again while its earlier Binding may have
// landed: it writes nothing after a Binding that landed, re-issues the very same Binding
// after one whose outcome is unknown, and chooses afresh only after one that was refused.
func TestBindRetryReusesTheCardsItHolds(t *testing.T) {
	timeout := apierrors.NewServerTimeout(podsGVR.GroupResource(), "create", 1)
	conflict := apierrors.NewConflict(podsGVR.GroupResource(), "p", errors.New("conflict"))
	tests := []struct {
		name      string
		first     error // the first Binding's answer (nil: success); the retry's succeeds
		wantFirst string
		wantBinds int
		wantSame  bool // the retry's Binding carries the first one's annotations
	}{
		{name: "after a Binding that landed, the retry writes nothing", wantFirst: landed, wantBinds: 1},
		{name: "after an unknown outcome, the retry re-sends the same cards", first: timeout, wantFirst: unknown, wantBinds: 2, wantSame: true},
		{name: "after a refused Binding, the retry chooses afresh", first: conflict, wantFirst: released, wantBinds: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := pod("p", 6, 0)
			e := newEnv(t, &api{bindErrs: []error{tc.first}}, node("n1", 16, 8), p)
			err := e.bind(context.Background(), t, p, "n1")
			if (err != nil) != (tc.first != nil) {
				t.Fatalf("first Bind: %v", err)
			}
			if got := e.hold(t, p); got != tc.wantFirst {
				t.Fatalf("after the first Bind, hold %s, want %s", got, tc.wantFirst)
			}
			// A fresh choice would be held since now: its assume time would differ.
			e.clock.Step(1)
			if err := e.bind(context.Background(), t, p, "n1"); err != nil {
				t.Fatalf("retry: %v", err)
			}
			bs := e.bindings()
			if len(bs) != tc.wantBinds {
				t.Fatalf("%d Bindings sent, want %d", len(bs), tc.wantBinds)
			}
			if same := cmp.Equal(bs[0].Annotations, bs[len(bs)-1].Annotations); tc.wantBinds == 2 && same != tc.wantSame {
				t.Errorf("retry's Binding carries the first one's annotations: %v, want %v\nfirst %v\nretry %v",
					same, tc.wantSame, bs[0].Annotations, bs[len(bs)-1].Annotations)
			}
			if _, usage, _ := e.cache.Counted(p.UID); !cmp.Equal(usage, gpushare.CardUnits{1: 6}) {
				t.Errorf("the ledger counts %v, want the pod once on card 1", usage)
			}
			if got := e.hold(t, p); got != landed {
				t.Errorf("after the retry, hold %s, want landed", got)
			}
		})
	}
}

// A bind of a pod whose earlier Binding is still in flight waits for its outcome, as long
// as its context lets it: cancelled, it gives up without writing (the scheduler retries).
func TestBindWaitsForAnEarlierBindingOfThePod(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context // the second bind's
		wantErr string          // the second bind's label; "": it succeeds
	}{
		{name: "cancelled while waiting: in_flight, nothing written", ctx: cancelled, wantErr: metrics.BindInFlight},
		{name: "waits, then answers the earlier Binding's success without writing", ctx: context.Background()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := pod("p", 6, 0)
			e := newEnv(t, nil, node("n1", 16, 8), p)
			// Room for a second Binding, so that a bind that wrongly writes again fails the
			// test instead of hanging it.
			e.calls.hold, e.calls.entered = make(chan struct{}), make(chan struct{}, 2)
			first := make(chan error, 1)
			go func() { first <- e.bind(context.Background(), t, p, "n1") }()
			<-e.calls.entered // the first Binding is in flight

			second := make(chan error, 1)
			go func() { second <- e.bind(tc.ctx, t, p, "n1") }()
			if tc.wantErr != "" {
				// It cannot return before the first Binding ends unless it gave up.
				err := <-second
				if be := asError(t, err); be.Label != tc.wantErr || !errors.Is(err, cache.ErrBindInFlight) {
					t.Errorf("second bind: %v (label %q), want %s wrapping ErrBindInFlight", err, be.Label, tc.wantErr)
				}
				if got := e.hold(t, p); got != inFlight {
					t.Errorf("while the first Binding is in flight, hold %s, want in flight", got)
				}
			}
			close(e.calls.hold)
			if err := <-first; err != nil {
				t.Fatalf("first bind: %v", err)
			}
			if tc.wantErr == "" {
				if err := <-second; err != nil {
					t.Errorf("second bind: %v", err)
				}
			}
			if n := len(e.bindings()); n != 1 {
				t.Errorf("%d Bindings sent, want 1", n)
			}
			if got := e.hold(t, p); got != landed {
				t.Errorf("hold %s, want landed", got)
			}
		})
	}
}

// workloadAware is binpack that refuses to place until readied with the workload, as fgd
// needs what Cache.ForPod gives it.
type workloadAware struct{ policy.Policy }

func (workloadAware) Place(policy.Node, gpushare.PodRequest) (policy.Placement, error) {
	return policy.Placement{}, errors.New("placed without the workload")
}

func (w workloadAware) WithWorkload(policy.Workload, policy.Capacity) policy.Policy { return w.Policy }

func TestBindReadiesAWorkloadAwarePolicy(t *testing.T) {
	p := pod("p", 6, 0)
	e := newEnv(t, nil, node("n1", 16, 8), p)
	binpack, err := policy.New("binpack")
	if err != nil {
		t.Fatal(err)
	}
	cp := cache.NewPod(p, res)
	req, err := cp.Request()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.binder.Bind(context.Background(), cp, "n1", req, workloadAware{binpack}); err != nil {
		t.Fatalf("Bind: %v", err)
	}
	if _, usage, _ := e.cache.Counted(p.UID); !cmp.Equal(usage, gpushare.CardUnits{1: 6}) {
		t.Errorf("the ledger counts %v, want binpack's choice, 6 on card 1", usage)
	}
}

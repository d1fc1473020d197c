package deviceplugin

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// handWritten is a pod placed without the extender: spec.nodeName and the given
// annotations (none when ann is nil), created age seconds after epoch.
func handWritten(name string, age int, units int64, ann map[string]string) *corev1.Pod {
	pod := makePod(name, age, 0, []ctr{{name: "main", units: units}}, app())
	pod.Annotations = ann
	return pod
}

// ledgerStep is one Allocate and what it must answer, leave on its pod and record as events.
type ledgerStep struct {
	units   int
	wantEnv map[string]string
	// wantErr: the call fails with FailedPrecondition and a message holding each part.
	wantErr []string
	pod     string
	// wantAnn: annotations of pod after the call (only the keys listed; "" = absent).
	wantAnn    map[string]string
	wantEvents []string // prefixes ("<type> <reason>") of the events of this call
}

func TestAllocateChecksTheLedger(t *testing.T) {
	const a100 = "a100-80gb" // one card of 80 GiB units
	tests := []struct {
		name  string
		spec  string
		pods  []runtime.Object
		steps []ledgerStep
	}{
		{
			// {"0":{"0":0}} for 80 units is no valid allocation: the first pod gets card 0
			// chosen by the plugin (80 of 80), the second finds no room.
			name: "self-placed pods on one 80-unit card",
			spec: a100,
			pods: []runtime.Object{
				handWritten("q1", 1, 80, map[string]string{gpushare.AnnotationAllocation: `{"0":{"0":0}}`}),
				handWritten("q2", 2, 80, map[string]string{gpushare.AnnotationAllocation: `{"0":{"0":0}}`}),
			},
			steps: []ledgerStep{
				{
					units: 80, pod: "q1",
					wantEnv: map[string]string{
						gpushare.EnvVisibleDevices: uuid(0), gpushare.EnvIndex: "0", gpushare.EnvPodUnits: "80",
						gpushare.EnvContainerUnits: "80", gpushare.EnvDevUnits: "80",
					},
					wantAnn: map[string]string{
						gpushare.AnnotationAllocation: `{"0":{"0":80}}`, gpushare.AnnotationIndex: "0",
						gpushare.AnnotationDevUnits: "80", gpushare.AnnotationPodUnits: "80",
						gpushare.AnnotationAllocated: "app/0", gpushare.AnnotationAssigned: "true",
						gpushare.AnnotationInitAllocation: "",
					},
					wantEvents: []string{"Normal " + eventCardChosen},
				},
				{
					units: 80, pod: "q2",
					wantErr: []string{"gpushare:", `pod default/q2`, "card 0 (" + uuid(0) + ", 80 units) has 80 units held by other pods"},
					wantAnn: map[string]string{
						gpushare.AnnotationAllocation: `{"0":{"0":0}}`, gpushare.AnnotationAllocated: "", gpushare.AnnotationAssigned: "",
					},
					wantEvents: []string{"Warning " + eventAllocateRefused},
				},
			},
		},
		{
			// A valid hand-written allocation naming a card that extender-bound a holds 10
			// of 14 units on (a not yet admitted: its allocation holds the card already).
			name: "valid allocation naming a full card",
			spec: "t4:2",
			pods: []runtime.Object{
				makePod("a", 1, 10, []ctr{{name: "main", units: 10}}, app(gpushare.CardUnits{0: 10})),
				makePod("b", 2, 11, []ctr{{name: "main", units: 8}}, app(gpushare.CardUnits{0: 8})),
			},
			steps: []ledgerStep{
				{
					units: 8, pod: "b",
					wantErr: []string{`refusing container "main" of pod default/b (8 units)`,
						"card 0 (" + uuid(0) + ", 14 units) has 10 units held by other pods on this node and the pod needs 8 there"},
					wantAnn:    map[string]string{gpushare.AnnotationAllocated: "", gpushare.AnnotationAssigned: "false"},
					wantEvents: []string{"Warning " + eventAllocateRefused},
				},
				{units: 10, pod: "a", wantEnv: env("10", "10", 0), wantAnn: map[string]string{gpushare.AnnotationAssigned: "true"}},
			},
		},
		{
			// No annotation at all: binpack puts 4 units on the fullest card with room
			// (card 0: 10 of 14 held by a), 5 units on card 1.
			name: "pods without annotations are placed by binpack",
			spec: "t4:2",
			pods: []runtime.Object{
				makePod("a", 1, 10, []ctr{{name: "main", units: 10}}, app(gpushare.CardUnits{0: 10})),
				handWritten("p4", 2, 4, nil),
				handWritten("p5", 3, 5, nil),
			},
			steps: []ledgerStep{
				{units: 4, pod: "p4", wantEnv: env("4", "4", 0), wantAnn: map[string]string{gpushare.AnnotationAllocation: `{"0":{"0":4}}`}, wantEvents: []string{"Normal " + eventCardChosen}},
				{units: 5, pod: "p5", wantEnv: env("5", "5", 1), wantAnn: map[string]string{gpushare.AnnotationAllocation: `{"0":{"1":5}}`}, wantEvents: []string{"Normal " + eventCardChosen}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t, tc.spec, tc.pods...)
			for i, s := range tc.steps {
				got, err := e.allocate(t, s.units)
				if s.wantErr != nil {
					if status.Code(err) != codes.FailedPrecondition {
						t.Fatalf("step %d: Allocate(%d) = %v, %v; want code FailedPrecondition", i, s.units, got, err)
					}
					for _, part := range s.wantErr {
						if !strings.Contains(err.Error(), part) {
							t.Errorf("step %d: error %q lacks %q", i, err, part)
						}
					}
				} else if err != nil {
					t.Fatalf("step %d: Allocate(%d): %v", i, s.units, err)
				}
				if diff := cmp.Diff(s.wantEnv, got); diff != "" {
					t.Errorf("step %d: env (-want,+got):\n%s", i, diff)
				}
				ann := e.podAnnotations(t, s.pod)
				for k, want := range s.wantAnn {
					if ann[k] != want {
						t.Errorf("step %d: pod %s annotation %s = %q, want %q", i, s.pod, k, ann[k], want)
					}
				}
				evs := e.drainEvents()
				if len(evs) != len(s.wantEvents) {
					t.Fatalf("step %d: events %q, want %d starting %q", i, evs, len(s.wantEvents), s.wantEvents)
				}
				for j, ev := range evs {
					if !strings.HasPrefix(ev, s.wantEvents[j]+" ") {
						t.Errorf("step %d: event %q, want prefix %q", i, ev, s.wantEvents[j])
					}
				}
			}
		})
	}
}

// What the plugin served counts even when the pod's annotation later lies: p was served
// card 0 (6 of 14 units); a hand edit moving it to card 1 does not free card 0 for q's 10.
func TestServedCardsOutliveEditedAnnotations(t *testing.T) {
	e := newTestEnv(t, "t4:2", makePod("p", 1, 10, []ctr{{name: "main", units: 6}}, app(gpushare.CardUnits{0: 6})))
	if got, err := e.allocate(t, 6); err != nil || got[gpushare.EnvIndex] != "0" {
		t.Fatalf("p: Allocate(6) = %v, %v; want card 0", got, err)
	}
	e.editAnnotations(t, "p", map[string]string{gpushare.AnnotationAllocation: `{"0":{"1":6}}`})
	q := makePod("q", 2, 11, []ctr{{name: "main", units: 10}}, app(gpushare.CardUnits{0: 10}))
	if _, err := e.client.CoreV1().Pods("default").Create(context.Background(), q, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := e.allocate(t, 10)
	want := "card 0 (" + uuid(0) + ", 14 units) has 6 units held by other pods on this node and the pod needs 10 there"
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), want) {
		t.Errorf("q: Allocate(10) error %v, want FailedPrecondition containing %q", err, want)
	}
}

// editAnnotations overwrites annotations of a pod in the API server and waits for the
// informer to show them.
func (e *testEnv) editAnnotations(t *testing.T, name string, ann map[string]string) {
	t.Helper()
	ctx := context.Background()
	pod, err := e.client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range ann {
		pod.Annotations[k] = v
	}
	if _, err := e.client.CoreV1().Pods("default").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	shows := func(p *corev1.Pod) bool {
		for k, v := range ann {
			if p.Annotations[k] != v {
				return false
			}
		}
		return true
	}
	waitInformerShows(t, e, name, shows)
}

// TestDeletedServedPodFreesItsCard: a served pod deleted before any other Allocate leaves
// the ledger at once; the next pod gets its card.
func TestDeletedServedPodFreesItsCard(t *testing.T) {
	e := newTestEnv(t, "t4", makePod("a", 1, 10, []ctr{{name: "main", units: 14}}, app(gpushare.CardUnits{0: 14})))
	if got, err := e.allocate(t, 14); err != nil || got[gpushare.EnvIndex] != "0" {
		t.Fatalf("a: Allocate(14) = %v, %v; want card 0", got, err)
	}
	if err := e.client.CoreV1().Pods("default").Delete(context.Background(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitInformer(t, e, 0)
	b := makePod("b", 2, 11, []ctr{{name: "main", units: 14}}, app(gpushare.CardUnits{0: 14}))
	if _, err := e.client.CoreV1().Pods("default").Create(context.Background(), b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := e.allocate(t, 14); err != nil || got[gpushare.EnvIndex] != "0" {
		t.Errorf("b after a was deleted: Allocate(14) = %v, %v; want card 0", got, err)
	}
}

// TestGrantDroppedWhenInformerDeletesPod: a pod served before the informer held it (found
// by the LIST fallback), then shown by the informer and deleted before any other Allocate,
// holds nothing: the informer's events drop its grant, instead of keeping its cards for
// forgetAfter as if the informer still lagged.
func TestGrantDroppedWhenInformerDeletesPod(t *testing.T) {
	e := newTestEnv(t, "t4")
	a := makePod("a", 1, 10, []ctr{{name: "main", units: 12}}, app(gpushare.CardUnits{0: 12}))
	alloc, _, err := gpushare.DefaultResources().ReadAllocation(a)
	if err != nil {
		t.Fatal(err)
	}
	e.plugin.ledger.grantContainers(a, alloc, e.plugin.informerHas(a), gpushare.ContainerRef{Index: 0})
	if held := e.heldByOthers(); held[0] != 12 {
		t.Fatalf("granted pod not in the informer yet: held %v, want 12 units on card 0", held)
	}
	ctx := context.Background()
	if _, err := e.client.CoreV1().Pods("default").Create(ctx, a, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitInformer(t, e, 1)
	if err := e.client.CoreV1().Pods("default").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitInformer(t, e, 0)
	// The informer updates its store before it hands the event to the plugin's handler.
	held := e.heldByOthers()
	for i := 0; i < 200 && held[0] != 0; i++ {
		time.Sleep(10 * time.Millisecond)
		held = e.heldByOthers()
	}
	if held[0] != 0 {
		t.Errorf("after the informer deleted the served pod: held %v, want nothing", held)
	}
}

// heldByOthers is what the ledger alone holds on each card: the pods it granted, with no
// pod view.
func (e *testEnv) heldByOthers() gpushare.CardUnits {
	return e.plugin.heldByOthers(nodeView{grants: e.plugin.ledger.snapshot()}, "")
}

// waitInformer waits until the pod informer holds n pods.
func waitInformer(t *testing.T, e *testEnv, n int) {
	t.Helper()
	for i := 0; i < 200 && len(e.plugin.pods.GetStore().List()) != n; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if got := len(e.plugin.pods.GetStore().List()); got != n {
		t.Fatalf("informer holds %d pods, want %d", got, n)
	}
}

// TestLedgerStates walks one grant through its life with a fake clock: granted unseen, kept
// for forgetAfter while the view does not show its pod; seen once the view shows it, and
// gone as soon as the view drops it; refused holds nothing until served again.
func TestLedgerStates(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	l := newLedger(testNode, clk, nil)
	pod := makePod("p", 1, 10, []ctr{{name: "main", units: 4}}, app(gpushare.CardUnits{0: 4}))
	alloc := app(gpushare.CardUnits{0: 4})
	ref := gpushare.ContainerRef{Index: 0}
	state := func() (grantState, sighting, bool) {
		g := l.snapshot()[pod.UID]
		if g == nil {
			return "", "", false
		}
		return g.state, g.seen, true
	}
	steps := []struct {
		name      string
		do        func()
		wantState grantState
		wantSeen  sighting
		wantKept  bool
	}{
		{"served before the informer shows the pod", func() { l.grantContainers(pod, alloc, false, ref) }, granted, unseen, true},
		{"absent from the view within forgetAfter", func() { clk.Step(forgetAfter); l.sync(nil) }, granted, unseen, true},
		{"refused: holds nothing", func() { l.refuse(pod) }, refused, unseen, true},
		{"served again undoes the refusal", func() { l.grantContainers(pod, alloc, false, ref) }, granted, unseen, true},
		{"shown by the view", func() { l.sync([]*corev1.Pod{pod}) }, granted, seen, true},
		{"dropped from the view: gone at once", func() { l.sync(nil) }, "", "", false},
	}
	for _, s := range steps {
		s.do()
		st, seen, kept := state()
		if st != s.wantState || seen != s.wantSeen || kept != s.wantKept {
			t.Fatalf("%s: state %q, %q, kept %v; want %q, %q, kept %v", s.name, st, seen, kept, s.wantState, s.wantSeen, s.wantKept)
		}
		if got, want := l.snapshot().refused(pod.UID), s.wantState == refused; got != want {
			t.Errorf("%s: refused %v, want %v", s.name, got, want)
		}
	}
	l.grantContainers(pod, alloc, false, ref)
	clk.Step(forgetAfter + time.Second)
	if g := l.sync(nil)[pod.UID]; g != nil {
		t.Errorf("an unseen grant outlived forgetAfter: %+v", g)
	}
}

// TestTerminatingPodKeepsItsCard: a served pod holds its card until the pod object is gone
// or terminal, whatever its deletionTimestamp: its containers run, with their memory, for
// the whole grace period. A self-placed pod admitted meanwhile must not be put on that card
// over its capacity.
func TestTerminatingPodKeepsItsCard(t *testing.T) {
	deleting := func(pod *corev1.Pod) {
		now := metav1.NewTime(epoch.Add(time.Minute))
		pod.DeletionTimestamp = &now
		pod.Status.Phase = corev1.PodRunning
	}
	tests := []struct {
		name     string
		change   func(*corev1.Pod)
		wantHeld bool // a's 10 units still count on card 0
	}{
		{name: "running", change: func(pod *corev1.Pod) { pod.Status.Phase = corev1.PodRunning }, wantHeld: true},
		{name: "terminating, still running", change: deleting, wantHeld: true},
		{name: "terminating, pending", change: func(pod *corev1.Pod) { deleting(pod); pod.Status.Phase = corev1.PodPending }, wantHeld: true},
		{name: "succeeded", change: func(pod *corev1.Pod) { pod.Status.Phase = corev1.PodSucceeded }},
		{name: "terminating, failed", change: func(pod *corev1.Pod) { deleting(pod); pod.Status.Phase = corev1.PodFailed }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t, "t4", makePod("a", 1, 10, []ctr{{name: "main", units: 10}}, app(gpushare.CardUnits{0: 10})))
			if got, err := e.allocate(t, 10); err != nil || got[gpushare.EnvIndex] != "0" {
				t.Fatalf("a: Allocate(10) = %v, %v; want card 0", got, err)
			}
			ctx := context.Background()
			a, err := e.client.CoreV1().Pods("default").Get(ctx, "a", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tc.change(a)
			if _, err := e.client.CoreV1().Pods("default").Update(ctx, a, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			waitInformerShows(t, e, "a", func(p *corev1.Pod) bool {
				return p.Status.Phase == a.Status.Phase && (p.DeletionTimestamp != nil) == (a.DeletionTimestamp != nil)
			})
			if _, err := e.client.CoreV1().Pods("default").Create(ctx, handWritten("q", 2, 10, nil), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			waitInformer(t, e, 2)
			got, err := e.allocate(t, 10)
			if !tc.wantHeld {
				if err != nil || got[gpushare.EnvIndex] != "0" {
					t.Errorf("q after a finished: Allocate(10) = %v, %v; want card 0", got, err)
				}
				return
			}
			want := "card 0 (" + uuid(0) + ", 14 units) has 10 units held by other pods"
			if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), want) {
				t.Errorf("q: Allocate(10) = %v, %v; want FailedPrecondition containing %q", got, err, want)
			}
			if held := e.heldByOthers(); held[0] != 10 {
				t.Errorf("ledger holds %v, want a's 10 units on card 0", held)
			}
		})
	}
}

// waitInformerShows waits until the pod informer shows pod name as ok accepts it.
func waitInformerShows(t *testing.T, e *testEnv, name string, ok func(*corev1.Pod) bool) {
	t.Helper()
	for i := 0; i < 200; i++ {
		for _, p := range e.plugin.podsOnNode() {
			if p.Name == name && ok(p) {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("informer never showed pod %s as expected", name)
}

// TestTerminatingPodIsNoCandidate: a terminating pod holds memory but is never the pod
// kubelet admits (it starts no container of a pod being deleted), so Allocate never serves
// it; a finished pod or one of another node neither holds memory nor is a candidate.
func TestTerminatingPodIsNoCandidate(t *testing.T) {
	now := metav1.NewTime(epoch)
	tests := []struct {
		name          string
		change        func(*corev1.Pod)
		wantHolds     bool
		wantCandidate bool
	}{
		{"pending", func(*corev1.Pod) {}, true, true},
		{"terminating", func(p *corev1.Pod) { p.DeletionTimestamp = &now }, true, false},
		{"failed", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }, false, false},
		{"succeeded", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, false, false},
		{"other node", func(p *corev1.Pod) { p.Spec.NodeName = "other" }, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := makePod("p", 1, 10, []ctr{{name: "main", units: 4}}, app(gpushare.CardUnits{0: 4}))
			tc.change(pod)
			if got := holdsMemory(pod, testNode); got != tc.wantHolds {
				t.Errorf("holdsMemory = %v, want %v", got, tc.wantHolds)
			}
			none := func(*corev1.Pod) map[gpushare.ContainerRef]bool { return nil }
			got := findContainers([]*corev1.Pod{pod}, testNode, gpushare.DefaultResources(), none, 4)
			if (len(got) == 1) != tc.wantCandidate {
				t.Errorf("candidates %d, want candidate %v", len(got), tc.wantCandidate)
			}
		})
	}
}

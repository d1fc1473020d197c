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
					wantEvents: []string{"Normal " + EventCardChosen},
				},
				{
					units: 80, pod: "q2",
					wantErr: []string{"gpushare:", `pod default/q2`, "card 0 (" + uuid(0) + ", 80 units) has 80 units held by other pods"},
					wantAnn: map[string]string{
						gpushare.AnnotationAllocation: `{"0":{"0":0}}`, gpushare.AnnotationAllocated: "", gpushare.AnnotationAssigned: "",
					},
					wantEvents: []string{"Warning " + EventAllocateRefused},
				},
			},
		},
		{
			// A valid hand-written allocation naming a card that extender-bound a holds 10
			// of 14 units on (a not yet admitted: its allocation is a claim already).
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
					wantEvents: []string{"Warning " + EventAllocateRefused},
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
				{units: 4, pod: "p4", wantEnv: env("4", "4", 0), wantAnn: map[string]string{gpushare.AnnotationAllocation: `{"0":{"0":4}}`}, wantEvents: []string{"Normal " + EventCardChosen}},
				{units: 5, pod: "p5", wantEnv: env("5", "5", 1), wantAnn: map[string]string{gpushare.AnnotationAllocation: `{"0":{"1":5}}`}, wantEvents: []string{"Normal " + EventCardChosen}},
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
	for i := 0; i < 100; i++ {
		for _, p := range e.plugin.podsOnNode() {
			if p.Name == name && p.Annotations[gpushare.AnnotationAllocation] == ann[gpushare.AnnotationAllocation] {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("informer never showed pod %s edited", name)
}

// TestValidAllocation: a pod's allocation is valid on this node (cards 0 and 1) when it is
// exactly its request on cards the node has (gpushare.PodRequest.ValidateAllocationOn).
func TestValidAllocation(t *testing.T) {
	e := newTestEnv(t, "t4:2")
	tests := []struct {
		name    string
		alloc   gpushare.PodAllocation // app/0 "big" wants 8 units on 2 cards; app/1 "cpu" no gpu-mem
		wantErr string
	}{
		{name: "valid", alloc: app(gpushare.CardUnits{0: 4, 1: 4})},
		{name: "units do not match the request", alloc: app(gpushare.CardUnits{0: 0, 1: 0}),
			wantErr: `container "big" (app/0): allocation holds 0 units on card 0, the request wants 4 per card`},
		{name: "too few cards", alloc: app(gpushare.CardUnits{0: 8}),
			wantErr: `container "big" (app/0): allocation lists 1 cards, the request wants 2`},
		{name: "card the node lacks", alloc: app(gpushare.CardUnits{0: 4, 7: 4}),
			wantErr: `container "big" (app/0): allocation names card 7, which the node does not have`},
		{name: "container without gpu-mem", alloc: app(gpushare.CardUnits{0: 4, 1: 4}, gpushare.CardUnits{0: 1}),
			wantErr: "allocation names container app/1, which does not exist or requests no gpu-mem"},
		{name: "empty entry for the container without gpu-mem names nothing", alloc: app(gpushare.CardUnits{0: 4, 1: 4}, gpushare.CardUnits{})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := makePod("p", 1, 1, []ctr{{name: "big", units: 8, cards: 2}, {name: "cpu"}}, tc.alloc)
			_, got, err := e.plugin.validAllocation(pod)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("error %v, want none", err)
			case tc.wantErr == "":
				if diff := cmp.Diff(tc.alloc, got); diff != "" {
					t.Errorf("allocation (-want +got):\n%s", diff)
				}
			case err == nil || err.Error() != tc.wantErr:
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestRestoreEditedRecord: once every gpu-mem container of a pod is served, a record that
// names other cards, or none, is written back to the served cards; a true record is left
// alone.
func TestRestoreEditedRecord(t *testing.T) {
	tests := []struct {
		name, edit string
		wantPatch  bool
	}{
		{name: "moved to another card", edit: `{"0":{"1":6}}`, wantPatch: true},
		{name: "zero units", edit: `{"0":{"0":0}}`, wantPatch: true},
		{name: "not JSON", edit: `{not json`, wantPatch: true},
		{name: "unchanged", edit: `{"0":{"0":6}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t, "t4:2", makePod("p", 1, 10, []ctr{{name: "main", units: 6}}, app(gpushare.CardUnits{0: 6})))
			if got, err := e.allocate(t, 6); err != nil || got[gpushare.EnvIndex] != "0" {
				t.Fatalf("p: Allocate(6) = %v, %v; want card 0", got, err)
			}
			e.editAnnotations(t, "p", map[string]string{gpushare.AnnotationAllocation: tc.edit})
			before := len(e.client.Actions())
			e.plugin.restoreRecords(context.Background(), e.plugin.podsOnNode())
			patched := false
			for _, a := range e.client.Actions()[before:] {
				patched = patched || a.GetVerb() == "patch"
			}
			if patched != tc.wantPatch {
				t.Fatalf("patched %v, want %v", patched, tc.wantPatch)
			}
			pod, err := e.client.CoreV1().Pods("default").Get(context.Background(), "p", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := pod.Annotations[gpushare.AnnotationAllocation]; got != `{"0":{"0":6}}` {
				t.Errorf("record %q, want the served card back: %q", got, `{"0":{"0":6}}`)
			}
			if got := pod.Annotations[gpushare.AnnotationIndex]; tc.wantPatch && got != "0" {
				t.Errorf("%s=%q, want 0", gpushare.AnnotationIndex, got)
			}
		})
	}
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
	for i := 0; i < 100 && len(e.plugin.podsOnNode()) > 0; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	b := makePod("b", 2, 11, []ctr{{name: "main", units: 14}}, app(gpushare.CardUnits{0: 14}))
	if _, err := e.client.CoreV1().Pods("default").Create(context.Background(), b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := e.allocate(t, 14); err != nil || got[gpushare.EnvIndex] != "0" {
		t.Errorf("b after a was deleted: Allocate(14) = %v, %v; want card 0", got, err)
	}
}

// TestRecordDroppedWhenInformerDeletesPod: a pod served before the informer held it (found
// by the LIST fallback), then shown by the informer and deleted before any other Allocate,
// holds nothing: the informer's events drop its record, instead of keeping its cards for
// forgetAfter as if the informer still lagged.
func TestRecordDroppedWhenInformerDeletesPod(t *testing.T) {
	e := newTestEnv(t, "t4")
	a := makePod("a", 1, 10, []ctr{{name: "main", units: 12}}, app(gpushare.CardUnits{0: 12}))
	alloc, _, err := gpushare.DefaultResources().ReadAllocation(a)
	if err != nil {
		t.Fatal(err)
	}
	e.plugin.record(a, gpushare.ContainerRef{Index: 0}, alloc)
	if held := e.plugin.heldByOthers(nil, ""); held[0] != 12 {
		t.Fatalf("recorded pod not in the informer yet: held %v, want 12 units on card 0", held)
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
	held := e.plugin.heldByOthers(nil, "")
	for i := 0; i < 200 && held[0] != 0; i++ {
		time.Sleep(10 * time.Millisecond)
		held = e.plugin.heldByOthers(nil, "")
	}
	if held[0] != 0 {
		t.Errorf("after the informer deleted the served pod: held %v, want nothing", held)
	}
}

// waitInformer waits until the pod informer holds n pods.
func waitInformer(t *testing.T, e *testEnv, n int) {
	t.Helper()
	for i := 0; i < 200 && len(e.plugin.cfg.Pods.GetStore().List()) != n; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if got := len(e.plugin.cfg.Pods.GetStore().List()); got != n {
		t.Fatalf("informer holds %d pods, want %d", got, n)
	}
}

package cache_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	"github.com/gpushare/gpushare/pkg/cache"
	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

const allocKey = gpushare.AnnotationAllocation

// startRecording starts a cache whose events go to a FakeRecorder.
func startRecording(t *testing.T, objs ...runtime.Object) (*ct.Env, *record.FakeRecorder) {
	t.Helper()
	rec := record.NewFakeRecorder(100)
	return ct.StartWith(t, ct.Options{TTL: time.Minute, Recorder: rec}, objs...), rec
}

// editPod applies edit to the pod default/name as the API holds it, as a tenant would.
func editPod(t *testing.T, env *ct.Env, name string, edit func(*corev1.Pod)) {
	t.Helper()
	ctx := context.Background()
	pod, err := env.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	edit(pod)
	if _, err := env.Client.CoreV1().Pods("default").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// setAlloc sets (or with "" removes) every card annotation of the pod but one: the
// per-container allocation gets value.
func setAlloc(value string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		delete(p.Annotations, gpushare.AnnotationIndex)
		delete(p.Annotations, allocKey)
		if value != "" {
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[allocKey] = value
		}
	}
}

// nextEvent waits for the next recorded event ("" after 10 s).
func nextEvent(t *testing.T, rec *record.FakeRecorder) string {
	t.Helper()
	select {
	case e := <-rec.Events:
		return e
	case <-time.After(10 * time.Second):
		return ""
	}
}

// noMoreEvents fails the test on any event the cache sends before the one a sentinel pod,
// placed on n1 with an unreadable record, makes it send now. The pod handler takes the
// informer's events in order and the recorder keeps the order of what it is sent, so an
// event still due from earlier pod updates arrives before the sentinel's: no sleep guesses
// how long to wait. Call it last: the sentinel counts on n1.
func noMoreEvents(t *testing.T, env *ct.Env, rec *record.FakeRecorder) {
	t.Helper()
	sentinel := ct.Placed(ct.Pod("sentinel", 1), "n1", gpushare.CardUnits{0: 1})
	setAlloc("sentinel")(sentinel)
	if _, err := env.Client.CoreV1().Pods("default").Create(context.Background(), sentinel, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		switch e := nextEvent(t, rec); {
		case e == "":
			t.Fatal("no event about the sentinel pod within 10s")
		case strings.Contains(e, allocKey+"=sentinel:"):
			return
		default:
			t.Errorf("unexpected event %q", e)
		}
	}
}

// selfPlaced is a running pod bound by something other than the extender.
func selfPlaced(pod *corev1.Pod, node string, ann map[string]string) *corev1.Pod {
	pod.Spec.NodeName = node
	pod.Status.Phase = corev1.PodRunning
	pod.Annotations = ann
	return pod
}

func conservative(t *testing.T, c *cache.Cache, node string) []string {
	t.Helper()
	n, _ := c.InspectNode(node)
	var out []string
	for _, card := range n.Cards {
		for _, p := range card.Pods {
			if p.Conservative {
				out = append(out, p.Name)
			}
		}
	}
	return out
}

// TestTenantEditsKeepTheCardCounted: a pod placed by the extender on card 0 (16 of 16) whose
// tenant rewrites the allocation annotation still counts 16 on card 0; a 16-unit pod can
// never be put on card 0 again.
func TestTenantEditsKeepTheCardCounted(t *testing.T) {
	tests := []struct {
		name        string
		ann         string
		wantEvent   string
		wantCards   string
		wantReserve []int // cards a new 16-unit pod gets; nil: no fit
	}{{
		name:        "zero units",
		ann:         `{"0":{"0":0}}`,
		wantEvent:   `Warning GPUShareAllocationInvalid scheduler.framework.gpushare.allocation={"0":{"0":0}}: allocation does not match the gpu-mem request: container "main" (app/0): allocation holds 0 units on card 0, the request wants 16 per card; still counted card0=16 units`,
		wantCards:   "0:16/16 1:0/16",
		wantReserve: []int{1},
	}, {
		name:        "not json",
		ann:         `{not json`,
		wantEvent:   `Warning GPUShareAllocationInvalid scheduler.framework.gpushare.allocation={not json: decoding allocation "{not json": invalid character 'n' looking for beginning of object key string; still counted card0=16 units`,
		wantCards:   "0:16/16 1:0/16",
		wantReserve: []int{1},
	}, {
		name:        "int64 max: no wrap",
		ann:         `{"0":{"0":9223372036854775807}}`,
		wantEvent:   `Warning GPUShareAllocationInvalid scheduler.framework.gpushare.allocation={"0":{"0":9223372036854775807}}: allocation does not match the gpu-mem request: container "main" (app/0): allocation holds 9223372036854775807 units on card 0, the request wants 16 per card; still counted card0=16 units`,
		wantCards:   "0:16/16 1:0/16",
		wantReserve: []int{1},
	}, {
		// A valid allocation on another card: the pod may really be there (a corrected
		// record) or still on card 0 (a tenant's move): it counts on both, max(16, 0) and
		// max(0, 16).
		name:      "moved to card 1",
		ann:       `{"0":{"1":16}}`,
		wantEvent: `Warning GPUShareAllocationChanged allocation changed to card1=16 units; counted card0=16 card1=16 units (the trusted allocation and the current one)`,
		wantCards: "0:16/16 1:16/16",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env, rec := startRecording(t, ct.Node("n1", 16, 16),
				ct.Placed(ct.Pod("p", 16), "n1", gpushare.CardUnits{0: 16}))
			if got, want := cards(env.Cache, "n1"), "0:16/16 1:0/16"; got != want {
				t.Fatalf("before: %q, want %q", got, want)
			}
			editPod(t, env, "p", setAlloc(tc.ann))
			if got := nextEvent(t, rec); got != tc.wantEvent {
				t.Errorf("event:\n got %q\nwant %q", got, tc.wantEvent)
			}
			if got := cards(env.Cache, "n1"); got != tc.wantCards {
				t.Errorf("cards %q, want %q", got, tc.wantCards)
			}
			pol := binpack(t)
			// 2 cards of 16: needs card 0's 16 as well, which stays taken.
			both := ct.Pod("both", 32)
			ct.SetGPU(&both.Spec.Containers[0], 32, 2)
			var fit *policy.FitError
			if err := env.Cache.Fits("n1", request(t, both), pol); !errors.As(err, &fit) {
				t.Errorf("Fits(16 on each of 2 cards) = %v, want a FitError", err)
			}
			next := ct.Pod("next", 16)
			r, err := env.Cache.Reserve(t.Context(), "n1", next, request(t, next), pol)
			var got []int
			if err == nil {
				got = r.Placement.Allocation.Cards()
			} else if !errors.As(err, &fit) {
				t.Fatalf("Reserve: %v", err)
			}
			if d := cmp.Diff(tc.wantReserve, got); d != "" {
				t.Errorf("cards reserved for a 16-unit pod (-want,+got):\n%s", d)
			}
			noMoreEvents(t, env, rec)
		})
	}
}

// TestPodsWithoutValidRecord: a bound pod that never showed a valid allocation counts its
// peak per-card need on every card of its node, bounded by each card's size.
func TestPodsWithoutValidRecord(t *testing.T) {
	multi := ct.Pod("p", 4) // app 4 on one card + app 16 over 2 cards: 4 + 8 = 12 per card
	multi.Spec.Containers = append(multi.Spec.Containers, corev1.Container{Name: "two"})
	ct.SetGPU(&multi.Spec.Containers[1], 16, 2)
	notDivisible := ct.Pod("p", 10) // invalid: 10 over 3 cards; raw 10 per card
	ct.SetGPU(&notDivisible.Spec.Containers[0], 10, 3)
	countOnly := ct.Pod("p", 0) // invalid: gpu-count without gpu-mem; the whole card
	ct.SetGPU(&countOnly.Spec.Containers[0], 0, 2)
	delete(countOnly.Spec.Containers[0].Resources.Limits, res.Mem)

	tests := []struct {
		name      string
		node      *corev1.Node
		pod       *corev1.Pod
		wantCards string
		wantEvent string
		fits      int64 // a pod of this many units must not fit
	}{{
		name:      "self-placed, request 80, zero-unit record, one 80-unit card",
		node:      ct.Node("n1", 80),
		pod:       selfPlaced(ct.Pod("p", 80), "n1", map[string]string{allocKey: `{"0":{"0":0}}`}),
		wantCards: "0:80/80",
		wantEvent: `Warning GPUShareAllocationInvalid scheduler.framework.gpushare.allocation={"0":{"0":0}}: allocation does not match the gpu-mem request: container "main" (app/0): allocation holds 0 units on card 0, the request wants 80 per card; counted on every card of node n1 until a valid record appears, for 2m0s at most: card0=80 units`,
		fits:      80,
	}, {
		name:      "self-placed without annotation, 2 cards",
		node:      ct.Node("n1", 16, 16),
		pod:       selfPlaced(ct.Pod("p", 8), "n1", nil),
		wantCards: "0:8/16 1:8/16",
		wantEvent: `Warning GPUShareAllocationInvalid no allocation annotation: not a valid allocation; counted on every card of node n1 until a valid record appears, for 2m0s at most: card0=8 card1=8 units`,
		fits:      9,
	}, {
		name:      "peak per card of two app containers: 4 + 16/2 = 12",
		node:      ct.Node("n1", 16, 16),
		pod:       selfPlaced(multi, "n1", nil),
		wantCards: "0:12/16 1:12/16",
		wantEvent: `Warning GPUShareAllocationInvalid no allocation annotation: not a valid allocation; counted on every card of node n1 until a valid record appears, for 2m0s at most: card0=12 card1=12 units`,
		fits:      5,
	}, {
		name:      "need above the card size: bounded by each card, min(80, 16)",
		node:      ct.Node("n1", 16, 8),
		pod:       selfPlaced(ct.Pod("p", 80), "n1", nil),
		wantCards: "0:16/16 1:8/8",
		wantEvent: `Warning GPUShareAllocationInvalid no allocation annotation: not a valid allocation; counted on every card of node n1 until a valid record appears, for 2m0s at most: card0=16 card1=8 units`,
		fits:      1,
	}, {
		name:      "invalid request: its raw gpu-mem (10) on every card, even with a record",
		node:      ct.Node("n1", 16, 16),
		pod:       selfPlaced(notDivisible, "n1", map[string]string{allocKey: `{"0":{"0":10}}`}),
		wantCards: "0:10/16 1:10/16",
		wantEvent: `Warning GPUShareAllocationInvalid scheduler.framework.gpushare.allocation={"0":{"0":10}}: invalid gpu-mem request (container "main": aliyun.com/gpu-mem 10 is not divisible by aliyun.com/gpu-count 3 (each card gets an equal share)); counted on every card of node n1 until a valid record appears, for 2m0s at most: card0=10 card1=10 units`,
		fits:      7,
	}, {
		name:      "invalid request without gpu-mem: the whole of every card",
		node:      ct.Node("n1", 16, 16),
		pod:       selfPlaced(countOnly, "n1", nil),
		wantCards: "0:16/16 1:16/16",
		wantEvent: `Warning GPUShareAllocationInvalid no allocation annotation: invalid gpu-mem request (container "main": aliyun.com/gpu-count 2 without aliyun.com/gpu-mem); counted on every card of node n1 until a valid record appears, for 2m0s at most: card0=16 card1=16 units`,
		fits:      1,
	}, {
		// As after an extender restart: the first record seen is already tampered with.
		name:      "restart: extender-placed pod whose record was broken while the extender was down",
		node:      ct.Node("n1", 16, 16),
		pod:       ct.Placed(ct.Pod("p", 16), "n1", gpushare.CardUnits{0: 0}),
		wantCards: "0:16/16 1:16/16",
		wantEvent: `Warning GPUShareAllocationInvalid scheduler.framework.gpushare.allocation={"0":{"0":0}}, ALIYUN_COM_GPU_MEM_IDX=0: allocation does not match the gpu-mem request: container "main" (app/0): allocation holds 0 units on card 0, the request wants 16 per card; counted on every card of node n1 until a valid record appears, for 2m0s at most: card0=16 card1=16 units`,
		fits:      1,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env, rec := startRecording(t, tc.node, tc.pod)
			if got := cards(env.Cache, "n1"); got != tc.wantCards {
				t.Errorf("cards %q, want %q", got, tc.wantCards)
			}
			if got := nextEvent(t, rec); got != tc.wantEvent {
				t.Errorf("event:\n got %q\nwant %q", got, tc.wantEvent)
			}
			if d := cmp.Diff([]string{"p"}, dedupe(conservative(t, env.Cache, "n1"))); d != "" {
				t.Errorf("conservative pods (-want,+got):\n%s", d)
			}
			if got := env.Cache.Anomalies().Conservative; got != 1 {
				t.Errorf("Anomalies().Conservative = %d, want 1", got)
			}
			if err := env.Cache.Fits("n1", request(t, ct.Pod("q", tc.fits)), binpack(t)); err == nil {
				t.Errorf("a pod of %d units fits", tc.fits)
			}
			noMoreEvents(t, env, rec)
		})
	}
}

func dedupe(names []string) []string {
	var out []string
	for _, n := range names {
		if len(out) == 0 || out[len(out)-1] != n {
			out = append(out, n)
		}
	}
	return out
}

// TestValidRecordReplacesConservativeUsage: share-plugin records the card it served a
// self-placed pod: from then on the pod counts there only, and that record is trusted.
func TestValidRecordReplacesConservativeUsage(t *testing.T) {
	env, rec := startRecording(t, ct.Node("n1", 16, 16), selfPlaced(ct.Pod("p", 8), "n1", nil))
	if got, want := cards(env.Cache, "n1"), "0:8/16 1:8/16"; got != want {
		t.Fatalf("before: %q, want %q", got, want)
	}
	if got := nextEvent(t, rec); got == "" {
		t.Fatal("no event for the pod without record")
	}
	editPod(t, env, "p", setAlloc(`{"0":{"1":8}}`))
	ct.Eventually(t, "valid record replaces the conservative usage", func() bool { return cards(env.Cache, "n1") == "0:0/16 1:8/16" })
	if got := conservative(t, env.Cache, "n1"); len(got) != 0 {
		t.Errorf("still conservative: %v", got)
	}
	// Trusted now: breaking the record keeps card 1 counted.
	editPod(t, env, "p", setAlloc(`{"0":{"1":0}}`))
	if got, want := nextEvent(t, rec), `Warning GPUShareAllocationInvalid scheduler.framework.gpushare.allocation={"0":{"1":0}}: allocation does not match the gpu-mem request: container "main" (app/0): allocation holds 0 units on card 1, the request wants 8 per card; still counted card1=8 units`; got != want {
		t.Errorf("event:\n got %q\nwant %q", got, want)
	}
	if got, want := cards(env.Cache, "n1"), "0:0/16 1:8/16"; got != want {
		t.Errorf("after breaking the record: %q, want %q", got, want)
	}
	want := cache.AnomalyStats{Conservative: 0, Counts: map[string]uint64{"invalid": 1, "changed": 0, "missing": 1}}
	if d := cmp.Diff(want, env.Cache.Anomalies()); d != "" {
		t.Errorf("Anomalies (-want,+got):\n%s", d)
	}
}

// TestReservationIsTrusted: the cards Reserve held count for the pod even when it shows up
// bound with a broken record.
func TestReservationIsTrusted(t *testing.T) {
	env, rec := startRecording(t, ct.Node("n1", 16, 16), ct.Pod("p", 8))
	pod := ct.Pod("p", 8)
	r, err := env.Cache.Reserve(t.Context(), "n1", pod, request(t, pod), binpack(t))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]int{0}, r.Placement.Allocation.Cards()); d != "" {
		t.Fatalf("reserved cards (-want,+got):\n%s", d)
	}
	editPod(t, env, "p", func(p *corev1.Pod) {
		selfPlaced(p, "n1", map[string]string{allocKey: `{not json`})
	})
	if got, want := nextEvent(t, rec), `Warning GPUShareAllocationInvalid scheduler.framework.gpushare.allocation={not json: decoding allocation "{not json": invalid character 'n' looking for beginning of object key string; still counted card0=8 units`; got != want {
		t.Errorf("event:\n got %q\nwant %q", got, want)
	}
	n, _ := env.Cache.InspectNode("n1")
	want := []gpushare.InspectPod{{Name: "p", Namespace: "default", UID: "uid-p", Units: 8}}
	if d := cmp.Diff(want, n.Cards[0].Pods); d != "" || cards(env.Cache, "n1") != "0:8/16 1:0/16" {
		t.Errorf("card 0 pods (-want,+got):\n%s\ncards %s", d, cards(env.Cache, "n1"))
	}
}

// TestPodSeenBeforeItsNode: what a pod counts is decided once its node's inventory is known;
// a record naming a card the node does not have is not trusted.
func TestPodSeenBeforeItsNode(t *testing.T) {
	env, rec := startRecording(t, ct.Placed(ct.Pod("p", 16), "n1", gpushare.CardUnits{5: 16}))
	if got, want := cards(env.Cache, "n1"), "5:16/0!"; got != want {
		t.Errorf("before the node: %q, want %q", got, want)
	}
	if _, err := env.Client.CoreV1().Nodes().Create(context.Background(), ct.Node("n1", 16, 16), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, want := nextEvent(t, rec), `Warning GPUShareAllocationInvalid allocation card5=16 units: it names cards the node does not have; counted on every card of node n1 until a valid record appears, for 2m0s at most: card0=16 card1=16 units`; got != want {
		t.Errorf("event:\n got %q\nwant %q", got, want)
	}
	if got, want := cards(env.Cache, "n1"), "0:16/16 1:16/16"; got != want {
		t.Errorf("after the node: %q, want %q", got, want)
	}
}

// TestEventsOnTransitionsOnly: updates that do not change what the pod's record says send
// no event; each change does, once.
func TestEventsOnTransitionsOnly(t *testing.T) {
	env, rec := startRecording(t, ct.Node("n1", 16, 16), ct.Placed(ct.Pod("p", 8), "n1", gpushare.CardUnits{0: 8}))
	steps := []func(*corev1.Pod){
		setAlloc(`{not json`), // invalid: event
		func(p *corev1.Pod) { p.Labels = map[string]string{"a": "b"} }, // still invalid: none
		setAlloc(`{"0":{"0":3}}`),                                      // invalid another way: none
		setAlloc(`{"0":{"1":8}}`),                                      // valid, new card: changed
		setAlloc(`{"0":{"0":8}}`),                                      // back to the trusted card: none
		setAlloc(""),                                                   // missing: event
	}
	for _, s := range steps {
		editPod(t, env, "p", s)
	}
	var got []string
	for range 3 {
		got = append(got, nextEvent(t, rec))
	}
	want := []string{
		`Warning GPUShareAllocationInvalid scheduler.framework.gpushare.allocation={not json: decoding allocation "{not json": invalid character 'n' looking for beginning of object key string; still counted card0=8 units`,
		`Warning GPUShareAllocationChanged allocation changed to card1=8 units; counted card0=8 card1=8 units (the trusted allocation and the current one)`,
		`Warning GPUShareAllocationInvalid no allocation annotation: not a valid allocation; still counted card0=8 units`,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("events (-want,+got):\n%s", d)
	}
	wantStats := cache.AnomalyStats{Counts: map[string]uint64{"invalid": 1, "changed": 1, "missing": 1}}
	if d := cmp.Diff(wantStats, env.Cache.Anomalies()); d != "" {
		t.Errorf("Anomalies (-want,+got):\n%s", d)
	}
	// Put back on the trusted card, the record counts that card alone again.
	if got, want := cards(env.Cache, "n1"), "0:8/16 1:0/16"; got != want {
		t.Errorf("cards %q, want %q", got, want)
	}
	noMoreEvents(t, env, rec)
}

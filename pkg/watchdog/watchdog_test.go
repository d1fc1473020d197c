package watchdog

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpushare/gpushare/pkg/gpushare"
	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

func (e *testEnv) counter(t *testing.T) float64 {
	t.Helper()
	body := scrape(t, e.w)
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, `gpushare_container_over_grant_total{namespace="default",node="gpu-node"}`) {
			var v float64
			fmt.Sscan(l[strings.LastIndex(l, " ")+1:], &v)
			return v
		}
	}
	return 0
}

// TestWatchdogOverGrantEpisodes: nb's grant on card 0 is 4096 MiB; with threshold 5% it is
// over above 4300.8 MiB. The event and the counter come once the grace (1m) has passed,
// once per episode; dropping under ends the episode and going over again starts a new one.
// ok (4000 of 4096 on card 1) and 4200 MiB (within 5%) are never over.
func TestWatchdogOverGrantEpisodes(t *testing.T) {
	e := newWatchdogEnv(t, OverGrant{Threshold: 0.05, Grace: time.Minute})
	steps := []struct {
		sec        int
		nbMiB      int
		wantEvents int
		wantCount  float64
	}{
		{0, 5000, 0, 0},   // over: the episode starts
		{30, 5000, 0, 0},  // 30s < grace
		{60, 5000, 1, 1},  // 60s: event and counter
		{75, 5000, 0, 1},  // same episode: nothing new
		{90, 4200, 0, 1},  // 4200 <= 4300.8: the episode ends
		{105, 4400, 0, 1}, // over again: a new episode, grace again
		{150, 4400, 0, 1}, // 45s
		{165, 4400, 1, 2}, // 60s: the second episode's event
	}
	for _, s := range steps {
		e.use([3]int{0, 100, s.nbMiB}, [3]int{1, 200, 4000})
		e.at(s.sec)
		ev := e.overGrantEvents()
		if len(ev) != s.wantEvents {
			t.Fatalf("t=%ds: %d over-grant events %q, want %d", s.sec, len(ev), ev, s.wantEvents)
		}
		if got := e.counter(t); got != s.wantCount {
			t.Fatalf("t=%ds: counter %v, want %v", s.sec, got, s.wantCount)
		}
		for _, m := range ev {
			for _, want := range []string{"Warning " + gpushare.EventGPUMemoryOverGrant, `Container "main"`, fmt.Sprintf("uses %d MiB", s.nbMiB), "grant of 4096 MiB (threshold 5%)", uuid(0), "for 1m0s"} {
				if !strings.Contains(m, want) {
					t.Errorf("t=%ds: event %q lacks %q", s.sec, m, want)
				}
			}
		}
	}
}

// TestWatchdogNoGrantOnCard: a container using memory on a card it holds nothing on is over
// its grant (0) there; processes of pods without gpu-mem and of the host are unattributed.
func TestWatchdogNoGrantOnCard(t *testing.T) {
	e := newWatchdogEnv(t, OverGrant{Threshold: 0.05})
	e.use([3]int{0, 100, 1000}, [3]int{1, 100, 10}, [3]int{0, 300, 500}, [3]int{0, 400, 700})
	e.at(0)
	ev := e.overGrantEvents()
	if len(ev) != 1 || !strings.Contains(ev[0], "uses 10 MiB of GPU memory on card "+uuid(1)+", above its grant of 0 MiB") {
		t.Errorf("events %q, want one for nb's 10 MiB on card 1 with grant 0", ev)
	}
	body := scrape(t, e.w)
	for _, want := range []string{
		`gpushare_card_unattributed_memory_used_bytes{card="0",node="gpu-node",uuid="` + uuid(0) + `"} 1.2582912e+09`, // 500+700 MiB
		`gpushare_card_unattributed_memory_used_bytes{card="1",node="gpu-node",uuid="` + uuid(1) + `"} 0`,
		`gpushare_container_gpu_memory_used_bytes{card="1",container="main",namespace="default",node="gpu-node",pod="nb",uuid="` + uuid(1) + `"} 1.048576e+07`,
		`gpushare_container_gpu_memory_granted_bytes{card="1",container="main",namespace="default",node="gpu-node",pod="nb",uuid="` + uuid(1) + `"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestWatchdogMetrics: used and granted per container and card; several processes of one
// container add up; a container without processes reports 0 used; the series of a pod
// that is gone disappear.
func TestWatchdogMetrics(t *testing.T) {
	e := newWatchdogEnv(t, OverGrant{Threshold: 0.05, Grace: time.Minute})
	e.proc(t, 101, podCgroup(podUIDs["nb"], ctrID(1)))
	e.use([3]int{0, 100, 1000}, [3]int{0, 101, 2000})
	e.at(0)
	body := scrape(t, e.w)
	nb := `{card="0",container="main",namespace="default",node="gpu-node",pod="nb",uuid="` + uuid(0) + `"}`
	ok := `{card="1",container="main",namespace="default",node="gpu-node",pod="ok",uuid="` + uuid(1) + `"}`
	for _, want := range []string{
		"gpushare_container_gpu_memory_used_bytes" + nb + " 3.145728e+09", // 1000 + 2000 MiB
		"gpushare_container_gpu_memory_granted_bytes" + nb + " 4.294967296e+09",
		"gpushare_container_gpu_memory_used_bytes" + ok + " 0",
		"gpushare_container_gpu_memory_granted_bytes" + ok + " 4.294967296e+09",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	e.ledger.remove("ok")
	e.at(15)
	if body := scrape(t, e.w); strings.Contains(body, `pod="ok"`) {
		t.Errorf("/metrics still has series of the deleted pod ok")
	}
}

// TestWatchdogActions: annotate writes the pod annotation once per episode; evict posts an
// Eviction (create on pods/eviction), and one that a PodDisruptionBudget refuses (429) is
// retried at the next interval. none touches nothing.
func TestWatchdogActions(t *testing.T) {
	tests := []struct {
		name       string
		action     OverGrantAction
		refuse     int // evictions answered 429 before one succeeds
		wantEvicts int // eviction requests after three samples over
		wantAnn    bool
	}{
		{name: "none", action: OverGrantNone},
		{name: "annotate", action: OverGrantAnnotate, wantAnn: true},
		{name: "evict", action: OverGrantEvict, wantEvicts: 1},
		{name: "evict refused once, retried", action: OverGrantEvict, refuse: 1, wantEvicts: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newWatchdogEnv(t, OverGrant{Threshold: 0.05, Grace: 30 * time.Second, Action: tc.action})
			refusals := tc.refuse
			e.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() != "eviction" {
					return false, nil, nil
				}
				if refusals > 0 {
					refusals--
					return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
				}
				return true, nil, nil
			})
			e.use([3]int{0, 100, 6000})
			for _, sec := range []int{0, 30, 45, 60} {
				e.at(sec)
			}
			var evicts, patches int
			for _, a := range e.client.Actions() {
				switch {
				case a.Matches("create", "pods") && a.GetSubresource() == "eviction":
					evicts++
					ev := a.(k8stesting.CreateAction).GetObject()
					if m, err := metav1Object(ev); err != nil || m.GetName() != "nb" {
						t.Errorf("eviction of %v (%v), want nb", m, err)
					}
				case a.Matches("patch", "pods"):
					patches++
				case a.Matches("delete", "pods"):
					t.Errorf("the watchdog deleted a pod: %v", a)
				}
			}
			if evicts != tc.wantEvicts {
				t.Errorf("%d eviction requests, want %d", evicts, tc.wantEvicts)
			}
			ann := e.podAnnotations(t, "nb")[gpushare.AnnotationOverGrant]
			if tc.wantAnn {
				want := `{"container":"main","card":"` + uuid(0) + `","usedMiB":6000,"grantedMiB":4096,"since":"2026-01-01T00:00:00Z"}`
				if diff := cmp.Diff(want, ann); diff != "" {
					t.Errorf("annotation (-want,+got):\n%s", diff)
				}
				if patches != 1 {
					t.Errorf("%d pod patches, want 1 (once per episode)", patches)
				}
			} else if ann != "" || patches != 0 {
				t.Errorf("annotation %q and %d pod patches with action %s", ann, patches, tc.action)
			}
			if ev := e.overGrantEvents(); len(ev) != 1 {
				t.Errorf("%d over-grant events, want 1: %q", len(ev), ev)
			}
		})
	}
}

// TestWatchdogPublishesUsage: the node annotation carries per card the pods' containers
// and the unattributed MiB; it is written again only when an entry moves by a unit (1024
// MiB) or NodeResync (10m) passes.
func TestWatchdogPublishesUsage(t *testing.T) {
	e := newWatchdogEnv(t, OverGrant{Threshold: 0.05, Grace: time.Minute})
	patches := func() int {
		n := 0
		for _, a := range e.client.Actions() {
			if a.Matches("patch", "nodes") {
				n++
			}
		}
		return n
	}
	e.use([3]int{0, 100, 3000}, [3]int{0, 300, 500})
	e.at(0)
	node, err := e.client.CoreV1().Nodes().Get(context.Background(), testNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := gpushare.ParseUsage(node.Annotations[gpushare.AnnotationNodeUsage])
	if err != nil {
		t.Fatal(err)
	}
	want := gpushare.Usage{Version: 1, Time: epoch, Cards: []gpushare.CardUsage{
		{Index: 0, UUID: uuid(0), UnattributedMiB: 500, Pods: []gpushare.PodUsage{
			{Namespace: "default", Name: "nb", UID: types.UID(podUIDs["nb"]), Containers: []gpushare.ContainerUsage{{Name: "main", UsedMiB: 3000}}}}},
		{Index: 1, UUID: uuid(1), Pods: []gpushare.PodUsage{
			{Namespace: "default", Name: "ok", UID: types.UID(podUIDs["ok"]), Containers: []gpushare.ContainerUsage{{Name: "main", UsedMiB: 0}}}}},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("usage annotation (-want,+got):\n%s", diff)
	}
	steps := []struct {
		sec, mib    int
		wantPatches int
	}{
		{15, 3000, 1}, // unchanged
		{30, 4000, 1}, // 1000 MiB < one unit
		{45, 4024, 2}, // 1024 MiB: one unit
		{60, 4024, 2},
		{45 + 600, 4024, 3}, // NodeResync since the last write
	}
	for _, s := range steps {
		e.use([3]int{0, 100, s.mib}, [3]int{0, 300, 500})
		e.at(s.sec)
		if got := patches(); got != s.wantPatches {
			t.Errorf("t=%ds: %d node patches, want %d", s.sec, got, s.wantPatches)
		}
	}
}

// TestWatchdogRun: Run starts the watchdog on its ticker (fake clock) when UsageInterval is
// set; the node annotation appears at once.
func TestWatchdogRun(t *testing.T) {
	e := newWatchdogEnv(t, OverGrant{Threshold: 0.05})
	e.use([3]int{0, 100, 6000})
	// Each node patch (the usage annotation) is handed over here.
	patched := make(chan string)
	e.client.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		patched <- string(a.(k8stesting.PatchAction).GetPatch())
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	next := func(what string) string {
		t.Helper()
		select {
		case p := <-patched:
			return p
		case <-time.After(5 * time.Second):
			t.Fatalf("no node patch: %s", what)
			return ""
		}
	}
	if p := next("the first sample, at once"); !strings.Contains(p, `\"usedMiB\":6000`) {
		t.Errorf("first usage annotation %s, want 6000 MiB", p)
	}
	e.use([3]int{0, 100, 9000})
	e.clock.Step(15 * time.Second)
	if p := next("a sample on the next tick"); !strings.Contains(p, `\"usedMiB\":9000`) {
		t.Errorf("usage annotation after the tick %s, want 9000 MiB", p)
	}
}

func TestOverGrantValidate(t *testing.T) {
	tests := []struct {
		og      OverGrant
		wantErr bool
	}{
		{OverGrant{}, false},
		{OverGrant{Threshold: 10, Grace: time.Hour, Action: OverGrantEvict}, false},
		{OverGrant{Threshold: -0.01}, true},
		{OverGrant{Threshold: 10.5}, true},
		{OverGrant{Grace: -time.Second}, true},
		{OverGrant{Action: "delete"}, true},
		{OverGrant{MPSEscape: OverGrantAnnotate}, false},
		{OverGrant{MPSEscape: "kill"}, true},
	}
	for _, tc := range tests {
		err := tc.og.Validate()
		if (err != nil) != tc.wantErr {
			t.Errorf("Validate(%+v) = %v, want error %v", tc.og, err, tc.wantErr)
		}
	}
	og := OverGrant{}
	_ = og.Validate()
	if og.Action != OverGrantNone || og.MPSEscape != OverGrantEvict {
		t.Errorf("default actions %q and MPS escape %q, want none and evict", og.Action, og.MPSEscape)
	}
}

func metav1Object(o runtime.Object) (metav1.Object, error) {
	m, ok := o.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no object meta", o)
	}
	return m, nil
}

// TestWatchdogAttribution: init (sidecar) containers are charged by name like app
// containers; a process NVML cannot measure makes its container's figure a lower bound
// (unknown); a process missing from the proc root (no hostPID) is unattributed.
func TestWatchdogAttribution(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	multi := gpuPod("multi", ctr{name: "side", init: true, id: ctrID(10)}, ctr{name: "main", id: ctrID(11)})
	multi.Spec.InitContainers[0].RestartPolicy = &always
	e := newWatchdogEnv(t, OverGrant{Threshold: 0.05}, PodGrant{Pod: multi,
		Grant: gpushare.PodAllocation{Init: gpushare.Allocation{0: {1: 2}}, App: gpushare.Allocation{0: {1: 2}}}})
	e.proc(t, 500, podCgroup(podUIDs["multi"], ctrID(10)))
	e.proc(t, 501, podCgroup(podUIDs["multi"], ctrID(11)))
	e.use([3]int{1, 500, 1024}, [3]int{1, 999, 300})
	e.list(1, gpunvml.Process{PID: 501})
	e.at(0)
	node, err := e.client.CoreV1().Nodes().Get(context.Background(), testNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u, err := gpushare.ParseUsage(node.Annotations[gpushare.AnnotationNodeUsage])
	if err != nil {
		t.Fatal(err)
	}
	want := gpushare.CardUsage{Index: 1, UUID: uuid(1), UnattributedMiB: 300, Pods: []gpushare.PodUsage{
		{Namespace: "default", Name: "multi", UID: types.UID(podUIDs["multi"]), Containers: []gpushare.ContainerUsage{
			{Name: "main", UsedMiB: 0, Unknown: true}, {Name: "side", UsedMiB: 1024}}},
		{Namespace: "default", Name: "ok", UID: types.UID(podUIDs["ok"]), Containers: []gpushare.ContainerUsage{{Name: "main"}}},
	}}
	if diff := cmp.Diff(want, u.Cards[1]); diff != "" {
		t.Errorf("card 1 usage (-want,+got):\n%s", diff)
	}
	if ev := e.overGrantEvents(); len(ev) != 0 {
		t.Errorf("over-grant events %q, want none (1024 of 2048 MiB; unknown is not over)", ev)
	}
	if !e.w.warnedNoProc {
		t.Error("a process missing from the proc root was not reported (hostPID hint)")
	}
}

// TestWatchdogTerminatingPod: a terminating pod's processes are still charged to it (not
// unattributed) but it is not judged: no event, no action.
func TestWatchdogTerminatingPod(t *testing.T) {
	e := newWatchdogEnv(t, OverGrant{Threshold: 0.05, Action: OverGrantEvict})
	now := metav1.NewTime(epoch)
	e.ledger.update("nb", func(pod *corev1.Pod) { pod.DeletionTimestamp = &now })
	e.use([3]int{0, 100, 9000})
	e.at(0)
	e.at(60)
	if ev := e.overGrantEvents(); len(ev) != 0 {
		t.Errorf("events %q for a terminating pod", ev)
	}
	for _, a := range e.client.Actions() {
		if a.GetSubresource() == "eviction" {
			t.Errorf("evicted a terminating pod: %v", a)
		}
	}
	body := scrape(t, e.w)
	if !strings.Contains(body, `gpushare_container_gpu_memory_used_bytes{card="0",container="main",namespace="default",node="gpu-node",pod="nb",uuid="`+uuid(0)+`"} 9.437184e+09`) {
		t.Errorf("/metrics does not charge 9000 MiB to the terminating pod nb")
	}
}

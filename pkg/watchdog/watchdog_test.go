package watchdog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
)

// The watchdog tests run over the simulated node, whose cards are go-nvml's mock listing the
// processes of a processes file (pkg/nvml), with a fake /proc holding each process's cgroup
// file, a fake ledger, a fake API server and a fake clock.

type wdEnv struct {
	*testEnv
	root     string // fake proc root
	procFile string
}

// ctrID is the runtime ID of container n of the test pods.
func ctrID(n int) string { return fmt.Sprintf("%064x", n) }

// podCgroup is the cgroup file of a process in container id of pod uid (cgroup v2, systemd
// driver, containerd).
func podCgroup(uid, id string) string {
	return "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(uid, "-", "_") +
		".slice/cri-containerd-" + id + ".scope\n"
}

// running gives the pod's containers the runtime IDs ids (in spec order: init, then app).
func running(pod *corev1.Pod, ids ...string) *corev1.Pod {
	i := 0
	for _, c := range pod.Spec.InitContainers {
		pod.Status.InitContainerStatuses = append(pod.Status.InitContainerStatuses, corev1.ContainerStatus{Name: c.Name, ContainerID: "containerd://" + ids[i]})
		i++
	}
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, ContainerID: "containerd://" + ids[i]})
		i++
	}
	pod.Status.Phase = corev1.PodRunning
	return pod
}

// UIDs of makePod are "uid-<name>"; the cgroup parser wants real UUIDs, so the watchdog
// tests give their pods these.
var podUIDs = map[string]string{
	"nb":    "0d8e2f4a-6b1c-4e3d-9a7f-000000000001",
	"ok":    "0d8e2f4a-6b1c-4e3d-9a7f-000000000002",
	"cpu":   "0d8e2f4a-6b1c-4e3d-9a7f-000000000003",
	"multi": "0d8e2f4a-6b1c-4e3d-9a7f-000000000004",
}

func withUID(pod *corev1.Pod) *corev1.Pod {
	pod.UID = types.UID(podUIDs[pod.Name])
	return pod
}

// newWatchdogEnv: a 2-card T4 node (14 units each) with
//   - nb: container main, 4 units (4096 MiB) on card 0, process 100;
//   - ok: container main, 4 units on card 1, process 200;
//   - cpu: a pod that requests no gpu-mem, process 400;
//   - a host process 300.
func newWatchdogEnv(t *testing.T, og OverGrant, pods ...*corev1.Pod) *wdEnv {
	t.Helper()
	nb := running(withUID(makePod("nb", 1, 10, []ctr{{name: "main", units: 4}}, app(gpushare.CardUnits{0: 4}))), ctrID(1))
	ok := running(withUID(makePod("ok", 2, 11, []ctr{{name: "main", units: 4}}, app(gpushare.CardUnits{1: 4}))), ctrID(2))
	cpu := running(withUID(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "cpu", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: testNode, Containers: []corev1.Container{{Name: "app"}}}}), ctrID(4))
	root := t.TempDir()
	e := &wdEnv{testEnv: newTestEnv(t, "t4:2", og, root, append([]*corev1.Pod{nb, ok, cpu}, pods...)...), root: root}
	e.procFile = filepath.Join(t.TempDir(), "procs.yaml")
	e.sim.SetProcessesFile(e.procFile)
	e.proc(t, 100, podCgroup(podUIDs["nb"], ctrID(1)))
	e.proc(t, 200, podCgroup(podUIDs["ok"], ctrID(2)))
	e.proc(t, 300, "0::/system.slice/nvidia-persistenced.service\n")
	e.proc(t, 400, podCgroup(podUIDs["cpu"], ctrID(4)))
	return e
}

// proc writes the cgroup file of process pid under the fake proc root.
func (e *wdEnv) proc(t *testing.T, pid int, cgroup string) {
	t.Helper()
	dir := filepath.Join(e.root, fmt.Sprint(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(cgroup), 0o644); err != nil {
		t.Fatal(err)
	}
}

// use sets what the cards' processes use: "card pid MiB" triples, as NVML would list them.
func (e *wdEnv) use(t *testing.T, entries ...[3]int) {
	t.Helper()
	var b strings.Builder
	for _, x := range entries {
		fmt.Fprintf(&b, "- {card: %d, pid: %d, usedMiB: %d}\n", x[0], x[1], x[2])
	}
	if err := os.WriteFile(e.procFile, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// at advances the fake clock to epoch+sec and takes one sample.
func (e *wdEnv) at(t *testing.T, sec int) {
	t.Helper()
	e.clock.SetTime(epoch.Add(time.Duration(sec) * time.Second))
	e.w.step(context.Background())
}

func (e *wdEnv) overGrantEvents() []string {
	var out []string
	for _, ev := range e.drainEvents() {
		if strings.Contains(ev, gpushare.EventGPUMemoryOverGrant) {
			out = append(out, ev)
		}
	}
	return out
}

func (e *wdEnv) counter(t *testing.T) float64 {
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
		e.use(t, [3]int{0, 100, s.nbMiB}, [3]int{1, 200, 4000})
		e.at(t, s.sec)
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
	e.use(t, [3]int{0, 100, 1000}, [3]int{1, 100, 10}, [3]int{0, 300, 500}, [3]int{0, 400, 700})
	e.at(t, 0)
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
	e.use(t, [3]int{0, 100, 1000}, [3]int{0, 101, 2000})
	e.at(t, 0)
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
	e.at(t, 15)
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
			e.use(t, [3]int{0, 100, 6000})
			for _, sec := range []int{0, 30, 45, 60} {
				e.at(t, sec)
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
	e.use(t, [3]int{0, 100, 3000}, [3]int{0, 300, 500})
	e.at(t, 0)
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
		e.use(t, [3]int{0, 100, s.mib}, [3]int{0, 300, 500})
		e.at(t, s.sec)
		if got := patches(); got != s.wantPatches {
			t.Errorf("t=%ds: %d node patches, want %d", s.sec, got, s.wantPatches)
		}
	}
}

// TestWatchdogRun: Run starts the watchdog on its ticker (fake clock) when UsageInterval is
// set; the node annotation appears at once.
func TestWatchdogRun(t *testing.T) {
	e := newWatchdogEnv(t, OverGrant{Threshold: 0.05})
	e.use(t, [3]int{0, 100, 6000})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "the usage annotation", func() bool {
		n, err := e.client.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
		return err == nil && n.Annotations[gpushare.AnnotationNodeUsage] != ""
	})
	e.use(t, [3]int{0, 100, 9000})
	waitFor(t, "a sample on the next tick", func() bool {
		e.clock.Step(15 * time.Second)
		n, err := e.client.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
		return err == nil && strings.Contains(n.Annotations[gpushare.AnnotationNodeUsage], `"usedMiB":9000`)
	})
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
	}
	for _, tc := range tests {
		err := tc.og.Validate()
		if (err != nil) != tc.wantErr {
			t.Errorf("Validate(%+v) = %v, want error %v", tc.og, err, tc.wantErr)
		}
	}
	og := OverGrant{}
	_ = og.Validate()
	if og.Action != OverGrantNone {
		t.Errorf("default action %q, want none", og.Action)
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
	multi := makePod("multi", 3, 12, []ctr{{name: "side", units: 2, init: true}, {name: "main", units: 2}},
		gpushare.PodAllocation{Init: gpushare.Allocation{0: {1: 2}}, App: gpushare.Allocation{0: {1: 2}}})
	multi.Spec.InitContainers[0].RestartPolicy = &always
	multi = running(withUID(multi), ctrID(10), ctrID(11))
	e := newWatchdogEnv(t, OverGrant{Threshold: 0.05}, multi)
	e.proc(t, 500, podCgroup(podUIDs["multi"], ctrID(10)))
	e.proc(t, 501, podCgroup(podUIDs["multi"], ctrID(11)))
	if err := os.WriteFile(e.procFile, []byte("- {card: 1, pid: 500, usedMiB: 1024}\n- {card: 1, pid: 501}\n- {card: 1, pid: 999, usedMiB: 300}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.at(t, 0)
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
	e.use(t, [3]int{0, 100, 9000})
	e.at(t, 0)
	e.at(t, 60)
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

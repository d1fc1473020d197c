package watchdog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpushare/gpushare/pkg/gpushare"
	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

// The watchdog tests run over a node of two T4 cards (14 GiB units each) whose process
// listing the test sets, with a fake /proc holding each process's cgroup file, a fake
// ledger, a fake API server and a fake clock.

const testNode = "gpu-node"

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// uuid is the UUID of card i of testNode.
func uuid(i int) string { return gpunvml.SimulatedUUID(testNode, i) }

// fakeLedger is the node agent's ledger as the watchdog sees it.
type fakeLedger struct {
	mu     sync.Mutex
	grants []PodGrant
}

func (l *fakeLedger) Grants() []PodGrant {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]PodGrant(nil), l.grants...)
}

// remove drops the named pod from the pod view.
func (l *fakeLedger) remove(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, pc := range l.grants {
		if pc.Pod.Name == name {
			l.grants = append(l.grants[:i], l.grants[i+1:]...)
			return
		}
	}
}

// update applies change to a copy of the named pod, which replaces it in the pod view.
func (l *fakeLedger) update(name string, change func(*corev1.Pod)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, pc := range l.grants {
		if pc.Pod.Name == name {
			pod := pc.Pod.DeepCopy()
			change(pod)
			l.grants[i].Pod = pod
		}
	}
}

type testEnv struct {
	w      *Watchdog
	ledger *fakeLedger
	events *record.FakeRecorder
	client *fake.Clientset
	clock  *clocktesting.FakeClock
	root   string // fake proc root

	mu    sync.Mutex
	procs map[int][]gpunvml.Process // by card index
	// util is each card's per-process utilisation, utilErr its error (by card index);
	// utilCalls counts the reads.
	util      map[int][]gpunvml.ProcessUtilization
	utilErr   map[int]error
	utilCalls int
}

// Pods of the test node, by name; each UID is a real UUID, which the cgroup parser wants.
var podUIDs = map[string]string{
	"nb":    "0d8e2f4a-6b1c-4e3d-9a7f-000000000001",
	"ok":    "0d8e2f4a-6b1c-4e3d-9a7f-000000000002",
	"cpu":   "0d8e2f4a-6b1c-4e3d-9a7f-000000000003",
	"multi": "0d8e2f4a-6b1c-4e3d-9a7f-000000000004",
	"mps":   "0d8e2f4a-6b1c-4e3d-9a7f-000000000005",
}

// ctr is a container of gpuPod: its name, whether it is an init container, its runtime ID.
type ctr struct {
	name string
	init bool
	id   string
}

// gpuPod is a running pod on testNode (UID from podUIDs) with containers ctrs.
func gpuPod(name string, ctrs ...ctr) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(podUIDs[name])},
		Spec:       corev1.PodSpec{NodeName: testNode},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, c := range ctrs {
		st := corev1.ContainerStatus{Name: c.name, ContainerID: "containerd://" + c.id}
		if c.init {
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Name: c.name})
			pod.Status.InitContainerStatuses = append(pod.Status.InitContainerStatuses, st)
		} else {
			pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: c.name})
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, st)
		}
	}
	return pod
}

// ctrID is the runtime ID of container n of the test pods.
func ctrID(n int) string { return fmt.Sprintf("%064x", n) }

// podCgroup is the cgroup file of a process in container id of pod uid (cgroup v2, systemd
// driver, containerd).
func podCgroup(uid, id string) string {
	return "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(uid, "-", "_") +
		".slice/cri-containerd-" + id + ".scope\n"
}

// newWatchdogEnv: a 2-card T4 node (14 units each) with
//   - nb: container main, 4 units (4096 MiB) on card 0, process 100;
//   - ok: container main, 4 units on card 1, process 200;
//   - cpu: a pod that requests no gpu-mem, process 400;
//   - a host process 300;
//
// with the pods of namespace kube-system exempt from unclaimed reports,
// and more pods with their grants.
func newWatchdogEnv(t *testing.T, og OverGrant, more ...PodGrant) *testEnv {
	t.Helper()
	app := func(cu gpushare.CardUnits) gpushare.PodAllocation {
		return gpushare.PodAllocation{App: gpushare.Allocation{0: cu}}
	}
	grants := append([]PodGrant{
		{Pod: gpuPod("nb", ctr{name: "main", id: ctrID(1)}), Grant: app(gpushare.CardUnits{0: 4})},
		{Pod: gpuPod("ok", ctr{name: "main", id: ctrID(2)}), Grant: app(gpushare.CardUnits{1: 4})},
		{Pod: gpuPod("cpu", ctr{name: "app", id: ctrID(4)})},
	}, more...)
	objs := []runtime.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}}}
	for _, pc := range grants {
		objs = append(objs, pc.Pod)
	}
	if err := og.Validate(); err != nil {
		t.Fatal(err)
	}
	e := &testEnv{
		ledger: &fakeLedger{grants: grants},
		events: record.NewFakeRecorder(64),
		client: fake.NewClientset(objs...),
		clock:  clocktesting.NewFakeClock(epoch),
		root:   t.TempDir(),
		procs:  map[int][]gpunvml.Process{},
	}
	var cards []gpushare.Device
	for i := range 2 {
		cards = append(cards, gpushare.Device{Index: i, UUID: uuid(i), Model: "Tesla T4", MemoryMiB: 15079, Units: 14, Healthy: true})
	}
	e.w = New(Config{
		NodeName: testNode, Cards: cards, Unit: gpushare.GiB, Processes: e.processes, Utilization: e.utilization,
		Client: e.client, Recorder: e.events, Clock: e.clock,
		Interval: 15 * time.Second, Resync: 10 * time.Minute, OverGrant: og, ProcRoot: e.root,
		Unclaimed: Unclaimed{ExemptNamespaces: []string{"kube-system"}},
	}, e.ledger)
	e.proc(t, 100, podCgroup(podUIDs["nb"], ctrID(1)))
	e.proc(t, 200, podCgroup(podUIDs["ok"], ctrID(2)))
	e.proc(t, 300, "0::/system.slice/nvidia-persistenced.service\n")
	e.proc(t, 400, podCgroup(podUIDs["cpu"], ctrID(4)))
	return e
}

// processes is NVML's process listing of card index.
func (e *testEnv) processes(index int) ([]gpunvml.Process, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]gpunvml.Process(nil), e.procs[index]...), nil
}

// utilization is NVML's per-process utilisation of card index.
func (e *testEnv) utilization(index int) ([]gpunvml.ProcessUtilization, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.utilCalls++
	if err := e.utilErr[index]; err != nil {
		return nil, err
	}
	return append([]gpunvml.ProcessUtilization(nil), e.util[index]...), nil
}

// use sets what the cards' processes use: "card pid MiB" triples, as NVML would list them.
func (e *testEnv) use(entries ...[3]int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.procs = map[int][]gpunvml.Process{}
	for _, x := range entries {
		e.procs[x[0]] = append(e.procs[x[0]], gpunvml.Process{PID: uint32(x[1]), UsedBytes: uint64(x[2]) << 20, UsedKnown: true})
	}
}

// list adds a process to card's listing as is (UsedKnown false: NVML cannot measure it).
func (e *testEnv) list(card int, p gpunvml.Process) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.procs[card] = append(e.procs[card], p)
}

// proc writes the cgroup file of process pid under the fake proc root.
func (e *testEnv) proc(t *testing.T, pid int, cgroup string) {
	t.Helper()
	dir := filepath.Join(e.root, fmt.Sprint(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(cgroup), 0o644); err != nil {
		t.Fatal(err)
	}
}

// at advances the fake clock to epoch+sec and takes one sample.
func (e *testEnv) at(sec int) {
	e.clock.SetTime(epoch.Add(time.Duration(sec) * time.Second))
	e.w.step(context.Background())
}

// drainEvents returns the events recorded so far ("<type> <reason> <message>").
func (e *testEnv) drainEvents() []string {
	var out []string
	for {
		select {
		case ev := <-e.events.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

func (e *testEnv) overGrantEvents() []string { return e.eventsWith(gpushare.EventGPUMemoryOverGrant) }

// eventsWith drains the events recorded so far and returns those of reason.
func (e *testEnv) eventsWith(reason string) []string {
	var out []string
	for _, ev := range e.drainEvents() {
		if strings.Contains(ev, reason) {
			out = append(out, ev)
		}
	}
	return out
}

// podAnnotations reads a pod's annotations from the fake API server.
func (e *testEnv) podAnnotations(t *testing.T, name string) map[string]string {
	t.Helper()
	pod, err := e.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod.Annotations
}

// scrape returns the watchdog's metrics in the text format.
func scrape(t *testing.T, w *Watchdog) string {
	t.Helper()
	b, err := collect(w, "gpushare_container_over_grant_total", "gpushare_container_gpu_memory_used_bytes",
		"gpushare_container_gpu_memory_granted_bytes", "gpushare_card_unattributed_memory_used_bytes",
		"gpushare_pod_unclaimed_gpu_memory_used_bytes", "gpushare_mps_escapes_total")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// collect returns the watchdog's metrics of the given names in the text format.
func collect(w *Watchdog, names ...string) (string, error) {
	b, err := testutil.CollectAndFormat(w.Collector(), expfmt.TypeTextPlain, names...)
	return string(b), err
}

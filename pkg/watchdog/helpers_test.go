package watchdog

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpushare/gpushare/pkg/gpushare"
	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

const testNode = "gpu-node"

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// uuid is the simulated UUID of card i of testNode.
func uuid(i int) string { return gpunvml.SimulatedUUID(testNode, i) }

// fakeLedger is the node agent's ledger as the watchdog sees it: each pod's claim is its
// allocation annotation.
type fakeLedger struct {
	mu   sync.Mutex
	pods []*corev1.Pod
}

func (l *fakeLedger) Claims() []PodClaim {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]PodClaim, 0, len(l.pods))
	for _, pod := range l.pods {
		a, _, _ := gpushare.DefaultResources().ReadAllocation(pod)
		out = append(out, PodClaim{Pod: pod, Claim: a})
	}
	return out
}

// remove drops the named pod from the pod view.
func (l *fakeLedger) remove(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, pod := range l.pods {
		if pod.Name == name {
			l.pods = append(l.pods[:i], l.pods[i+1:]...)
			return
		}
	}
}

// update applies change to the named pod of the pod view.
func (l *fakeLedger) update(name string, change func(*corev1.Pod)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, pod := range l.pods {
		if pod.Name == name {
			pod = pod.DeepCopy()
			change(pod)
			l.pods[i] = pod
		}
	}
}

type testEnv struct {
	w      *Watchdog
	ledger *fakeLedger
	events *record.FakeRecorder
	client *fake.Clientset
	sim    *gpunvml.Simulator
	clock  *clocktesting.FakeClock
}

// newTestEnv builds a watchdog over a simulated node (spec as --simulate) with GiB units,
// a fake API server holding the node and pods, and a pod view of pods.
func newTestEnv(t *testing.T, spec string, og OverGrant, procRoot string, pods ...*corev1.Pod) *testEnv {
	t.Helper()
	cards, err := gpunvml.ParseSimSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	sim, err := gpunvml.NewSimulator(testNode, cards)
	if err != nil {
		t.Fatal(err)
	}
	nv, err := gpunvml.New(sim.Library())
	if err != nil {
		t.Fatal(err)
	}
	devs, err := nv.Devices()
	if err != nil {
		t.Fatal(err)
	}
	var devices []gpushare.Device
	for _, d := range devs {
		devices = append(devices, gpushare.Device{Index: d.Index, UUID: d.UUID, Model: d.Model, MemoryMiB: d.MemoryMiB,
			Units: gpushare.GiB.UnitsOf(d.MemoryMiB), Healthy: true})
	}
	objs := []runtime.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}}}
	for _, p := range pods {
		objs = append(objs, p)
	}
	client := fake.NewClientset(objs...)
	if err := og.Validate(); err != nil {
		t.Fatal(err)
	}
	e := &testEnv{
		ledger: &fakeLedger{pods: pods},
		events: record.NewFakeRecorder(64),
		client: client,
		sim:    sim,
		clock:  clocktesting.NewFakeClock(epoch),
	}
	e.w = New(Config{
		NodeName: testNode, Cards: devices, Unit: gpushare.GiB, Processes: nv.Processes,
		Client: client, Recorder: e.events, Clock: e.clock,
		Interval: 15 * time.Second, Resync: 10 * time.Minute, OverGrant: og, ProcRoot: procRoot,
	}, e.ledger)
	return e
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
	reg := prometheus.NewRegistry()
	reg.MustRegister(w.Collector())
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// ctr is a container spec for makePod: units of gpu-mem.
type ctr struct {
	name  string
	units int64
	init  bool
}

// makePod is a pod on testNode created at epoch+age seconds whose allocation annotations
// say alloc (bindAt: assume time, seconds after epoch).
func makePod(name string, age int, bindAt int, ctrs []ctr, alloc gpushare.PodAllocation) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "default", UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(age) * time.Second)),
		},
		Spec: corev1.PodSpec{NodeName: testNode},
	}
	res := gpushare.DefaultResources()
	for _, c := range ctrs {
		k := corev1.Container{Name: c.name, Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
			res.Mem: *resource.NewQuantity(c.units, resource.DecimalSI)}}}
		if c.init {
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, k)
		} else {
			pod.Spec.Containers = append(pod.Spec.Containers, k)
		}
	}
	req, err := res.PodRequest(pod)
	if err != nil {
		panic(err)
	}
	pod.Annotations = gpushare.BindAnnotations(alloc, req.TotalUnits(), gpushare.CardUnits{0: 14, 1: 14},
		epoch.Add(time.Duration(bindAt)*time.Second))
	return pod
}

// app returns an allocation of app containers: container i → cards[i].
func app(cards ...gpushare.CardUnits) gpushare.PodAllocation {
	a := gpushare.PodAllocation{App: gpushare.Allocation{}}
	for i, c := range cards {
		a.App[i] = c
	}
	return a
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

package schedulerplugin

import (
	"context"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
)

// fakeHandle is the part of the framework handle New reads.
type fakeHandle struct {
	fwk.Handle
	client  *fake.Clientset
	factory informers.SharedInformerFactory
	dra     fwk.SharedDRAManager

	mu        sync.Mutex
	activated []string // the pods Activate was asked to move, namespace/name
}

func (h *fakeHandle) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range pods {
		h.activated = append(h.activated, p.Namespace+"/"+p.Name)
	}
}

func (h *fakeHandle) ClientSet() kubernetes.Interface                        { return h.client }
func (h *fakeHandle) SharedInformerFactory() informers.SharedInformerFactory { return h.factory }
func (h *fakeHandle) EventRecorder() events.EventRecorderLogger              { return nil }
func (h *fakeHandle) Parallelizer() fwk.Parallelizer                         { return goParallelizer{} }
func (h *fakeHandle) SharedDRAManager() fwk.SharedDRAManager                 { return h.dra }

// goParallelizer runs every piece in its own goroutine, as the scheduler's runs them in
// parallel chunks.
type goParallelizer struct{}

func (goParallelizer) Until(_ context.Context, pieces int, work workqueue.DoWorkPieceFunc, _ string) {
	var wg sync.WaitGroup
	for i := range pieces {
		wg.Go(func() { work(i) })
	}
	wg.Wait()
}

// testState is a CycleState holding plugin data, cloned as the framework clones it.
type testState struct {
	fwk.CycleState
	data map[fwk.StateKey]fwk.StateData
}

func newState() *testState { return &testState{data: map[fwk.StateKey]fwk.StateData{}} }

func (s *testState) Read(k fwk.StateKey) (fwk.StateData, error) {
	v, ok := s.data[k]
	if !ok {
		return nil, fwk.ErrNotFound
	}
	return v, nil
}
func (s *testState) Write(k fwk.StateKey, v fwk.StateData) { s.data[k] = v }
func (s *testState) Delete(k fwk.StateKey)                 { delete(s.data, k) }
func (s *testState) Clone() fwk.CycleState {
	out := newState()
	for k, v := range s.data {
		out.data[k] = v.Clone()
	}
	return out
}

type testNodeInfo struct {
	fwk.NodeInfo
	node        *v1.Node
	alloc, used testResource
	pods        int
}

func (n testNodeInfo) Node() *v1.Node                      { return n.node }
func (n testNodeInfo) GetAllocatable() fwk.Resource        { return n.alloc }
func (n testNodeInfo) GetRequested() fwk.Resource          { return n.used }
func (n testNodeInfo) GetPods() []fwk.PodInfo              { return make([]fwk.PodInfo, n.pods) }
func (n testNodeInfo) withNode(node *v1.Node) testNodeInfo { n.node = node; return n }

// testResource is a fwk.Resource: CPU in millicores, memory and storage in bytes.
type testResource struct {
	milliCPU, memory, storage int64
	podNumber                 int
	scalar                    map[v1.ResourceName]int64
}

func (r testResource) GetMilliCPU() int64                            { return r.milliCPU }
func (r testResource) GetMemory() int64                              { return r.memory }
func (r testResource) GetEphemeralStorage() int64                    { return r.storage }
func (r testResource) GetAllowedPodNumber() int                      { return r.podNumber }
func (r testResource) GetScalarResources() map[v1.ResourceName]int64 { return r.scalar }
func (r testResource) SetMaxResource(v1.ResourceList)                {}

// nodeInfo is the NodeInfo of a bare node named name: no pods, 64 CPUs, 256 GiB of memory,
// 1 TiB of ephemeral storage, room for 110 pods.
func nodeInfo(name string) testNodeInfo {
	n := &v1.Node{}
	n.Name = name
	return testNodeInfo{node: n, alloc: testResource{milliCPU: 64000, memory: 256 << 30, storage: 1 << 40, podNumber: 110}}
}

type testPodInfo struct {
	fwk.PodInfo
	pod *v1.Pod
}

func (p testPodInfo) GetPod() *v1.Pod { return p.pod }

// fixture is the plugin on a fake clientset whose Bindings act as the API server's.
type fixture struct {
	pl     *Plugin
	client *fake.Clientset
	h      *fakeHandle
}

func start(t testing.TB, args runtime.Object, objs ...runtime.Object) *fixture {
	t.Helper()
	return startWithDRA(t, args, nil, objs...)
}

// startWithDRA is start with dra as the scheduler's DRA manager (nil: none).
func startWithDRA(t testing.TB, args runtime.Object, dra fwk.SharedDRAManager, objs ...runtime.Object) *fixture {
	t.Helper()
	if d, ok := dra.(*fakeDRA); ok { // the API server holds what the DRA manager lists
		for _, s := range d.slices {
			objs = append(objs, s)
		}
		for _, cl := range d.claims {
			objs = append(objs, cl)
		}
	}
	client := fake.NewClientset(objs...)
	ct.ReactToBindings(client)
	factory := informers.NewSharedInformerFactory(client, 0)
	ctx, cancel := context.WithCancel(context.Background())
	h := &fakeHandle{client: client, factory: factory, dra: dra}
	p, err := New(ctx, args, h)
	if err != nil {
		cancel()
		t.Fatalf("New: %v", err)
	}
	factory.Start(ctx.Done())
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	pl := p.(*Plugin)
	deadline := time.Now().Add(30 * time.Second)
	for !pl.cache.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("ledger not ready after 30s")
		}
		time.Sleep(time.Millisecond)
	}
	f := &fixture{pl: pl, client: client, h: h}
	waitDRASynced(t, f)
	return f
}

// prefilter runs PreFilter on a fresh state and returns it.
func (f *fixture) prefilter(t testing.TB, pod *v1.Pod) (*testState, *fwk.PreFilterResult, *fwk.Status) {
	t.Helper()
	st := newState()
	res, status := f.pl.PreFilter(context.Background(), st, pod, nil)
	return st, res, status
}

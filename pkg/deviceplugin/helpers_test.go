package deviceplugin

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/noderuntime"
	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

const testNode = "gpu-node"

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// uuid is the simulated UUID of card i of testNode.
func uuid(i int) string { return gpunvml.SimulatedUUID(testNode, i) }

type testEnv struct {
	plugin *Plugin
	events *record.FakeRecorder
	client *fake.Clientset
	sim    *gpunvml.Simulator
	clock  *clocktesting.FakeClock
	dir    string
}

// newTestEnv builds a plugin over a simulated node (spec as --simulate) with GiB units, a
// fake API server holding the node and objs, and a synced pod informer.
func newTestEnv(t *testing.T, spec string, objs ...runtime.Object) *testEnv {
	t.Helper()
	return newTestEnvUnit(t, spec, gpushare.GiB, objs...)
}

// newTestEnvUnit is newTestEnv with another memory unit.
func newTestEnvUnit(t *testing.T, spec string, unit gpushare.Unit, objs ...runtime.Object) *testEnv {
	t.Helper()
	return newTestEnvNode(t, spec, func(c *noderuntime.Config) { c.Unit = unit }, objs...)
}

// newTestEnvNode is newTestEnv with the node's Config adjusted by adjust before
// noderuntime.New.
func newTestEnvNode(t *testing.T, spec string, adjust func(*noderuntime.Config), objs ...runtime.Object) *testEnv {
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
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}}
	client := fake.NewClientset(append([]runtime.Object{node}, objs...)...)
	factory := informers.NewSharedInformerFactory(client, 0)
	pods := factory.Core().V1().Pods().Informer()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), pods.HasSynced) {
		t.Fatal("pod informer did not sync")
	}
	clk := clocktesting.NewFakeClock(epoch)
	dir := shortTempDir(t)
	events := record.NewFakeRecorder(64)
	nc := noderuntime.Config{
		Name: testNode, Unit: gpushare.GiB, NVML: nv, Simulated: true, Client: client, Pods: pods, Clock: clk,
		HealthRecovery: time.Minute, Recorder: events,
	}
	if adjust != nil {
		adjust(&nc)
	}
	n, err := noderuntime.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{Resources: gpushare.DefaultResources(), PluginDir: dir, AllocateWait: 300 * time.Millisecond}, n)
	if err != nil {
		t.Fatal(err)
	}
	return &testEnv{plugin: p, events: events, client: client, sim: sim, clock: clk, dir: dir}
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

// fakePodResources is kubelet's PodResources List on a unix socket: the pods it lists are
// set by the test.
type fakePodResources struct {
	podresourcesapi.UnimplementedPodResourcesListerServer
	mu   sync.Mutex
	pods []*podresourcesapi.PodResources
}

func (f *fakePodResources) List(context.Context, *podresourcesapi.ListPodResourcesRequest) (*podresourcesapi.ListPodResourcesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &podresourcesapi.ListPodResourcesResponse{PodResources: f.pods}, nil
}

// set replaces the pods kubelet lists.
func (f *fakePodResources) set(pods ...*podresourcesapi.PodResources) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods = pods
}

// withPodResources serves a fake PodResources API in the env's folder and points the
// plugin at it.
func (e *testEnv) withPodResources(t *testing.T) *fakePodResources {
	t.Helper()
	path := filepath.Join(e.dir, "pod-resources.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakePodResources{}
	srv := grpc.NewServer()
	podresourcesapi.RegisterPodResourcesListerServer(srv, f)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	e.plugin.cfg.PodResourcesSocket = path
	return f
}

// kubeletPod is a pod as PodResources lists it (namespace default): each named container
// holds gpu-mem devices when withDevices, else none yet (the pod being admitted).
func kubeletPod(name string, withDevices bool, containers ...string) *podresourcesapi.PodResources {
	pr := &podresourcesapi.PodResources{Name: name, Namespace: "default"}
	for _, c := range containers {
		cr := &podresourcesapi.ContainerResources{Name: c}
		if withDevices {
			cr.Devices = []*podresourcesapi.ContainerDevices{{
				ResourceName: string(gpushare.DefaultMemResource), DeviceIds: []string{gpushare.FakeDeviceID(uuid(0), 0)},
			}}
		}
		pr.Containers = append(pr.Containers, cr)
	}
	return pr
}

// shortTempDir is a temp folder with a path short enough for unix sockets (108 bytes).
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// ctr is a container spec for makePod: units of gpu-mem over cards cards.
type ctr struct {
	name  string
	units int64
	cards int64 // 0: no gpu-count limit
	init  bool
}

// makePod is a pod on testNode created at epoch+age seconds whose allocation annotations
// say what the extender chose (bindAt: assume time, seconds after epoch).
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
		limits := corev1.ResourceList{res.Mem: *resource.NewQuantity(c.units, resource.DecimalSI)}
		if c.cards > 0 {
			limits[res.Count] = *resource.NewQuantity(c.cards, resource.DecimalSI)
		}
		k := corev1.Container{Name: c.name, Resources: corev1.ResourceRequirements{Limits: limits}}
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
	pod.Annotations = gpushare.BindAnnotations(alloc, req.TotalUnits(), gpushare.CardUnits{0: 14, 1: 14, 2: 14, 3: 14}, gpushare.Unit{},
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

// availableIDs returns the fake device IDs 0..perCard-1 of cards 0..cards-1 of testNode, as
// kubelet offers them to GetPreferredAllocation.
func availableIDs(cards, perCard int) []string {
	var out []string
	for c := range cards {
		for j := range perCard {
			out = append(out, gpushare.FakeDeviceID(uuid(c), j))
		}
	}
	return out
}

// fakeIDs returns n device IDs as kubelet would pass them.
func fakeIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "id-" + strconv.Itoa(i)
	}
	return out
}

// allocate calls Allocate for one container of n units.
func (e *testEnv) allocate(t *testing.T, n int) (map[string]string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := e.plugin.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: fakeIDs(n)}}})
	if err != nil {
		return nil, err
	}
	if len(resp.ContainerResponses) != 1 {
		t.Fatalf("Allocate returned %d container responses, want 1", len(resp.ContainerResponses))
	}
	return resp.ContainerResponses[0].Envs, nil
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

// stubKubelet is kubelet's Registration service on <dir>/kubelet.sock.
type stubKubelet struct {
	pluginapi.UnimplementedRegistrationServer
	reqs chan *pluginapi.RegisterRequest
	srv  *grpc.Server
}

func (s *stubKubelet) Register(_ context.Context, r *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	s.reqs <- r
	return &pluginapi.Empty{}, nil
}

func startStubKubelet(t *testing.T, dir string) *stubKubelet {
	t.Helper()
	l, err := net.Listen("unix", filepath.Join(dir, "kubelet.sock"))
	if err != nil {
		t.Fatal(err)
	}
	s := &stubKubelet{reqs: make(chan *pluginapi.RegisterRequest, 8), srv: grpc.NewServer()}
	pluginapi.RegisterRegistrationServer(s.srv, s)
	go func() { _ = s.srv.Serve(l) }()
	t.Cleanup(s.srv.Stop)
	return s
}

// waitRegister waits for one Register call.
func (s *stubKubelet) waitRegister(t *testing.T, within time.Duration) *pluginapi.RegisterRequest {
	t.Helper()
	select {
	case r := <-s.reqs:
		return r
	case <-time.After(within):
		t.Fatalf("plugin did not register within %v", within)
		return nil
	}
}

// dialPlugin connects to the plugin's socket in dir.
func dialPlugin(t *testing.T, dir string) pluginapi.DevicePluginClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, socketName), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return pluginapi.NewDevicePluginClient(conn)
}

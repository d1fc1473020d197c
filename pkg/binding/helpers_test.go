package binding_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/gpushare/gpushare/pkg/binding"
	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
	"github.com/gpushare/gpushare/pkg/reasons"
)

var (
	epoch   = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	res     = gpushare.DefaultResources()
	podsGVR = corev1.SchemeGroupVersion.WithResource("pods")
)

// node is a cgpu=true node whose inventory lists healthy Tesla T4 cards of these sizes.
func node(name string, units ...int64) *corev1.Node {
	devs := make([]gpushare.Device, len(units))
	for i, u := range units {
		devs[i] = gpushare.Device{Index: i, UUID: "GPU-" + name + "-" + strconv.Itoa(i), Model: "Tesla T4", Units: u, Healthy: true}
	}
	inv, err := gpushare.Inventory{Unit: gpushare.GiB, Devices: devs}.Marshal()
	if err != nil {
		panic(err)
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        name,
		Labels:      map[string]string{gpushare.NodeLabelKey: gpushare.NodeLabelValue},
		Annotations: map[string]string{gpushare.AnnotationNodeInventory: inv},
	}}
}

// pod is a pending pod "default/<name>" of UID "uid-<name>" whose one container asks mem
// gpu-mem units on cards cards (no GPU resource when mem is 0; gpu-count only when cards > 0).
func pod(name string, mem, cards int64) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main"}}},
	}
	lim := corev1.ResourceList{}
	if mem > 0 {
		lim[res.Mem] = *resource.NewQuantity(mem, resource.DecimalSI)
	}
	if cards > 0 {
		lim[res.Count] = *resource.NewQuantity(cards, resource.DecimalSI)
	}
	p.Spec.Containers[0].Resources.Limits = lim
	return p
}

// placed is p bound to node with container 0 on cards, as a bind records it.
func placed(p *corev1.Pod, node string, cards gpushare.CardUnits) *corev1.Pod {
	var a gpushare.PodAllocation
	a.Set(gpushare.ContainerRef{Index: 0}, cards)
	var total int64
	for _, u := range cards {
		total += u
	}
	p.Annotations = gpushare.BindAnnotations(a, total, gpushare.CardUnits{}, gpushare.Unit{}, epoch)
	p.Spec.NodeName = node
	return p
}

// api scripts what the fake API server answers to a bind's calls. It is fixed before the
// informers start: the fake clientset's reactor chain may not change while it serves them.
type api struct {
	bindErrs []error // answers to successive Binding creates; past its end, success
	// readBack is the pod a Get answers given the stored one and the last Binding sent
	// (nil when none was); nil: the stored pod.
	readBack  func(stored *corev1.Pod, sent *corev1.Binding) (*corev1.Pod, error)
	patchErrs []error // answers to successive pod patches; past its end, the fake's own
	// bindPanics: a Binding create panics (a bug below Write).
	bindPanics bool

	// Reactors run under the fake clientset's lock, so these need no other.
	binds, patches int
	sent           *corev1.Binding
}

// install adds a's reactors. A successful Binding is not applied to the stored pod: the
// informer would then turn the hold into a placed pod on its own schedule, and the tests
// read the hold as the bind left it.
func (a *api) install(client *fake.Clientset) {
	client.PrependReactor("create", "pods", func(act k8stesting.Action) (bool, runtime.Object, error) {
		if act.GetSubresource() != "binding" {
			return false, nil, nil
		}
		if a.bindPanics {
			panic("binding create panicked")
		}
		b := act.(k8stesting.CreateAction).GetObject().(*corev1.Binding)
		a.sent = b
		a.binds++
		if a.binds <= len(a.bindErrs) && a.bindErrs[a.binds-1] != nil {
			return true, nil, a.bindErrs[a.binds-1]
		}
		return true, b, nil
	})
	client.PrependReactor("get", "pods", func(act k8stesting.Action) (bool, runtime.Object, error) {
		if a.readBack == nil || act.GetSubresource() != "" {
			return false, nil, nil
		}
		get := act.(k8stesting.GetAction)
		obj, err := client.Tracker().Get(podsGVR, get.GetNamespace(), get.GetName())
		if err != nil {
			return true, nil, err
		}
		p, err := a.readBack(obj.(*corev1.Pod).DeepCopy(), a.sent)
		return true, p, err
	})
	client.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		a.patches++
		if a.patches <= len(a.patchErrs) && a.patchErrs[a.patches-1] != nil {
			return true, nil, a.patchErrs[a.patches-1]
		}
		return false, nil, nil
	})
}

// env is a running cache on a fake clientset scripted by an api, and a Binder on both.
type env struct {
	client *fake.Clientset
	cache  *cache.Cache
	clock  *testingclock.FakeClock
	calls  *calls
	binder *binding.Binder
}

// newEnv starts a cache on a fake clientset holding objs, with a's reactors, and waits
// until the cache has seen them all. Everything stops when the test ends.
func newEnv(t *testing.T, a *api, objs ...runtime.Object) *env {
	t.Helper()
	if a == nil {
		a = &api{}
	}
	client := fake.NewClientset(objs...)
	a.install(client)
	factory := informers.NewSharedInformerFactory(client, 0)
	clk := testingclock.NewFakeClock(epoch)
	c, err := cache.New(cache.Config{
		Nodes: factory.Core().V1().Nodes().Informer(), Pods: factory.Core().V1().Pods().Informer(),
		Resources: res, PodClient: client.CoreV1(), Clock: clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})
	// Run marks the cache ready once its handlers have seen every object.
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return c.Ready(), nil }); err != nil {
		t.Fatalf("cache not ready: %v", err)
	}
	log := &calls{}
	return &env{client: client, cache: c, clock: clk, calls: log, binder: &binding.Binder{
		Cache: c, Client: observed{client, log}, Wording: reasons.NewWording(res, "cgpu=true"),
	}}
}

// bind runs Binder.Bind for p on node with the binpack policy, as the extender does.
func (e *env) bind(ctx context.Context, t *testing.T, p *corev1.Pod, node string) error {
	t.Helper()
	cp := cache.NewPod(p, res)
	req, err := cp.Request()
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.New("binpack")
	if err != nil {
		t.Fatal(err)
	}
	return e.binder.Bind(ctx, cp, node, req, policy.ForChoice(pol, req.Choice))
}

// bindings are the Binding creates sent, in order.
func (e *env) bindings() []*corev1.Binding {
	var out []*corev1.Binding
	for _, a := range e.client.Actions() {
		if a.GetVerb() == "create" && a.GetSubresource() == "binding" {
			out = append(out, a.(k8stesting.CreateAction).GetObject().(*corev1.Binding))
		}
	}
	return out
}

// count is the number of calls of verb on pods (subresource "" for the pod itself).
func (e *env) count(verb, subresource string) int {
	n := 0
	for _, a := range e.client.Actions() {
		if a.GetVerb() == verb && a.GetResource() == podsGVR && a.GetSubresource() == subresource {
			n++
		}
	}
	return n
}

// Hold states of a pod in the ledger (see env.hold).
const (
	released = "released"  // no cards held: a retry chooses afresh
	landed   = "landed"    // cards held, the Binding landed: a retry writes nothing
	unknown  = "unknown"   // cards held, outcome unknown: a retry re-issues the same Binding
	inFlight = "in flight" // cards held for a Binding still in flight
)

// hold says what the ledger keeps for p, by asking as a retry on the holding node does, and
// leaves the hold as it was.
func (e *env) hold(t *testing.T, p *corev1.Pod) string {
	t.Helper()
	node, ok := e.cache.HeldOn(p.UID)
	if !ok {
		return released
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // never wait for a Binding in flight
	rsv, err := e.cache.Reserve(ctx, node, p, gpushare.PodRequest{}, nil)
	switch {
	case errors.Is(err, cache.ErrBindInFlight):
		return inFlight
	case err != nil:
		t.Fatalf("probing the hold of %s: %v", p.Name, err)
	case rsv.Landed:
		return landed
	}
	e.cache.Finish(rsv, cache.BindUnknown) // as it was
	return unknown
}

// calls logs, in order, the client calls a bind makes (with the context each got) and the
// Lease's events, which the fake clientset's reactors cannot see.
type calls struct {
	mu     sync.Mutex
	events []string
	ctxs   map[string]context.Context // the last context of each call
	// hold, when set, keeps every Binding create waiting until it is closed, after sending
	// on entered (buffered: a Binding that should not be sent must not block).
	hold    chan struct{}
	entered chan struct{}
}

func (c *calls) add(event string, ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, event)
	if ctx != nil {
		if c.ctxs == nil {
			c.ctxs = map[string]context.Context{}
		}
		c.ctxs[event] = ctx
	}
}

func (c *calls) log() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.events...)
}

func (c *calls) ctx(event string) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ctxs[event]
}

// observed is a clientset whose pod Bind, Get and Patch are logged in calls with their
// contexts, and fail as client-go does when that context has ended, before the fake answers.
type observed struct {
	kubernetes.Interface
	calls *calls
}

func (o observed) CoreV1() corev1client.CoreV1Interface {
	return observedCore{o.Interface.CoreV1(), o.calls}
}

type observedCore struct {
	corev1client.CoreV1Interface
	calls *calls
}

func (o observedCore) Pods(ns string) corev1client.PodInterface {
	return observedPods{o.CoreV1Interface.Pods(ns), o.calls}
}

type observedPods struct {
	corev1client.PodInterface
	calls *calls
}

func (o observedPods) Bind(ctx context.Context, b *corev1.Binding, opts metav1.CreateOptions) error {
	o.calls.add("bind", ctx)
	if o.calls.hold != nil {
		o.calls.entered <- struct{}{}
		<-o.calls.hold
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return o.PodInterface.Bind(ctx, b, opts)
}

func (o observedPods) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error) {
	o.calls.add("get", ctx)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return o.PodInterface.Get(ctx, name, opts)
}

func (o observedPods) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*corev1.Pod, error) {
	o.calls.add("patch", ctx)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return o.PodInterface.Patch(ctx, name, pt, data, opts, sub...)
}

// lease is a Lease that grants left, or refuses with err, and logs its events in calls.
type lease struct {
	left  time.Duration
	err   error
	calls *calls
}

func (l *lease) BeginWrite() (time.Duration, func(), error) {
	l.calls.add("lease begin", nil)
	if l.err != nil {
		return 0, nil, l.err
	}
	return l.left, func() { l.calls.add("lease done", nil) }, nil
}

// asError is err as a *binding.Error, failing the test when it is not one.
func asError(t *testing.T, err error) *binding.Error {
	t.Helper()
	var be *binding.Error
	if !errors.As(err, &be) {
		t.Fatalf("error %v (%T) is not a *binding.Error", err, err)
	}
	return be
}

// Package cachetest builds nodes and pods for tests and starts a cache on a fake clientset
// with real informers. Test code only.
package cachetest

import (
	"context"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/gpushare"
)

// Epoch is the fake clock's start.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Node returns a node labelled cgpu=true whose inventory annotation lists healthy cards of
// the given sizes in units, indexes 0.. in order.
func Node(name string, cardUnits ...int64) *corev1.Node {
	devs := make([]gpushare.Device, len(cardUnits))
	for i, u := range cardUnits {
		devs[i] = gpushare.Device{Index: i, UUID: "GPU-" + name + "-" + strconv.Itoa(i), Model: "Tesla T4", Units: u, Healthy: true}
	}
	return NodeWith(name, devs...)
}

// NodeWith returns a node labelled cgpu=true with exactly these cards in its inventory.
func NodeWith(name string, devs ...gpushare.Device) *corev1.Node {
	s, err := gpushare.Inventory{Unit: gpushare.GiB, Devices: devs}.Marshal()
	if err != nil {
		panic(err)
	}
	n := BareNode(name)
	n.Annotations = map[string]string{gpushare.AnnotationNodeInventory: s}
	return n
}

// AllocatableNode returns a labelled node without inventory annotation: allocatable gpu-mem
// and gpu-count only (the old device plugin).
func AllocatableNode(name string, mem, count int64) *corev1.Node {
	n := BareNode(name)
	res := gpushare.DefaultResources()
	n.Status.Allocatable = corev1.ResourceList{
		res.Mem:   *resource.NewQuantity(mem, resource.DecimalSI),
		res.Count: *resource.NewQuantity(count, resource.DecimalSI),
	}
	return n
}

// BareNode is a labelled node with no GPU information.
func BareNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: name, Labels: map[string]string{gpushare.NodeLabelKey: gpushare.NodeLabelValue},
	}}
}

// Pod returns a pending pod in namespace "default" with UID "uid-<name>" and one container
// "main" with gpu-mem limit mem (no gpu resources when mem is 0).
func Pod(name string, mem int64) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
	if mem > 0 {
		SetGPU(&p.Spec.Containers[0], mem, 0)
	}
	return p
}

// SetGPU sets a container's gpu-mem limit and, when cards > 0, its gpu-count limit.
func SetGPU(c *corev1.Container, mem, cards int64) {
	res := gpushare.DefaultResources()
	if c.Resources.Limits == nil {
		c.Resources.Limits = corev1.ResourceList{}
	}
	c.Resources.Limits[res.Mem] = *resource.NewQuantity(mem, resource.DecimalSI)
	if cards > 0 {
		c.Resources.Limits[res.Count] = *resource.NewQuantity(cards, resource.DecimalSI)
	}
}

// Placed binds pod to node with container 0 holding `cards` (card index → units), as the
// extender's bind annotations describe it, and marks it Running.
func Placed(pod *corev1.Pod, node string, cards gpushare.CardUnits) *corev1.Pod {
	var a gpushare.PodAllocation
	a.Set(gpushare.ContainerRef{Index: 0}, cards)
	var total int64
	for _, u := range cards {
		total += u
	}
	pod.Annotations = gpushare.BindAnnotations(a, total, gpushare.CardUnits{}, gpushare.Unit{}, Epoch)
	pod.Spec.NodeName = node
	pod.Status.Phase = corev1.PodRunning
	return pod
}

// Env is a running cache on a fake clientset. Its informers store the cache's slim objects:
// look pods up with Cache.Pod, or read them from Client.
type Env struct {
	Client  *fake.Clientset
	Cache   *cache.Cache
	Clock   *testingclock.FakeClock
	Factory informers.SharedInformerFactory
}

// Start seeds a fake clientset with objs, builds the informers and the cache, starts them
// and waits until the cache is ready. Everything stops when the test ends.
func Start(tb testing.TB, ttl time.Duration, objs ...runtime.Object) *Env {
	tb.Helper()
	return StartWith(tb, Options{TTL: ttl}, objs...)
}

// StartTracking is Start with Config.TrackWorkload (host accounting and workload learning,
// as the extender runs for the fgd policy).
func StartTracking(tb testing.TB, objs ...runtime.Object) *Env {
	tb.Helper()
	return StartWith(tb, Options{Track: true}, objs...)
}

// StartWithSlowPods is Start whose pod LIST is held until release is closed, while the node
// LIST answers at once: the order an extender restarting in a large cluster sees. It does not
// wait for the cache to be ready.
func StartWithSlowPods(tb testing.TB, release <-chan struct{}, objs ...runtime.Object) *Env {
	tb.Helper()
	return StartWith(tb, Options{TTL: time.Minute, HoldPods: release}, objs...)
}

// Options are StartWith's settings: the reservation TTL (0: the default), whether the cache
// tracks the workload, where its events go (nil: nowhere), and a channel holding the pod
// LIST until closed (nil: none; StartWith then does not wait for the cache to be ready).
type Options struct {
	TTL      time.Duration
	Track    bool
	Recorder record.EventRecorder
	HoldPods <-chan struct{}
	// Shared runs the cache on informers it shares (Config.Shared) with NodeSelector
	// (nil: every node); Env.Factory's listers then hold full objects.
	Shared       bool
	NodeSelector labels.Selector
}

// StartWith is Start with every cache setting the tests vary.
func StartWith(tb testing.TB, o Options, objs ...runtime.Object) *Env {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	clk := testingclock.NewFakeClock(Epoch)
	c, err := cache.New(cache.Config{
		Nodes:          factory.Core().V1().Nodes().Informer(),
		Pods:           podInformer(ctx, factory, client, o.HoldPods),
		Resources:      gpushare.DefaultResources(),
		PodClient:      client.CoreV1(),
		ReservationTTL: o.TTL,
		Clock:          clk,
		TrackWorkload:  o.Track,
		Recorder:       o.Recorder,
		Shared:         o.Shared,
		NodeSelector:   o.NodeSelector,
	})
	if err != nil {
		tb.Fatalf("cache.New: %v", err)
	}
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Run(ctx)
	}()
	tb.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})
	env := &Env{Client: client, Cache: c, Clock: clk, Factory: factory}
	if o.HoldPods != nil {
		return env
	}
	deadline := time.Now().Add(30 * time.Second)
	for !c.Ready() {
		if time.Now().After(deadline) {
			tb.Fatalf("cache not ready after 30s")
		}
		time.Sleep(time.Millisecond)
	}
	return env
}

// Eventually polls cond every millisecond for up to 10 s and fails the test with msg if it
// never holds (informer events arrive asynchronously).
func Eventually(tb testing.TB, msg string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting: %s", msg)
		}
		time.Sleep(time.Millisecond)
	}
}

// podInformer is the factory's pod informer; with hold, one whose LIST and WATCH both wait
// until hold is closed (the fake clientset serialises its reactors, so delaying there would
// hold the node LIST too).
func podInformer(ctx context.Context, f informers.SharedInformerFactory, client *fake.Clientset, hold <-chan struct{}) toolscache.SharedIndexInformer {
	if hold == nil {
		return f.Core().V1().Pods().Informer()
	}
	wait := func() error {
		select {
		case <-hold:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return f.InformerFor(&corev1.Pod{}, func(kubernetes.Interface, time.Duration) toolscache.SharedIndexInformer {
		lw := &toolscache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				if err := wait(); err != nil {
					return nil, err
				}
				return client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				if err := wait(); err != nil {
					return nil, err
				}
				return client.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, o)
			},
		}
		// The fake clientset cannot stream a watch-list; say so, as its own informers do.
		return toolscache.NewSharedIndexInformer(toolscache.ToListWatcherWithWatchListSemantics(lw, client),
			&corev1.Pod{}, 0, toolscache.Indexers{})
	})
}

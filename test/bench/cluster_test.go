package bench

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/gpushare/gpushare/internal/bench/scale"
	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/policy"
	"github.com/gpushare/gpushare/pkg/routes"
)

// The scale benchmark's cluster size.
const (
	numNodes  = 5000
	numPlaced = 40000
)

// cluster is a ready cache over numNodes nodes and numPlaced placed pods, and the
// extender's scheduler-verbs handler on it.
type cluster struct {
	objs    scale.Objects
	names   []string
	cache   *cache.Cache
	policy  policy.Policy
	handler http.Handler
}

var (
	once    sync.Once
	shared  *cluster
	initErr error
)

// getCluster builds the cluster once per test binary (about a second): every benchmark
// reads the same state, and Reserve benchmarks release what they take.
func getCluster(b *testing.B) *cluster {
	b.Helper()
	once.Do(func() { shared, initErr = newCluster() })
	if initErr != nil {
		b.Fatal(initErr)
	}
	return shared
}

// placedUnits spreads card usage: pod k (k = node*8 + card) holds 1 + k%12 units of its
// card, so cards have 4..15 units free and filters see realistic mixes.
func placedUnits(k int) int64 { return 1 + int64(k%12) }

func newCluster() (*cluster, error) {
	objs := scale.DefaultObjects()
	names := make([]string, numNodes)
	nodes := make([]runtime.Object, numNodes)
	for i := range names {
		names[i] = scale.NodeName(i)
		n, err := objs.Node(names[i], false)
		if err != nil {
			return nil, err
		}
		nodes[i] = n
	}
	pods := make([]runtime.Object, numPlaced)
	now := time.Now()
	for k := range pods {
		p := objs.PlacedPod(k, names[(k/objs.Cards)%numNodes], k%objs.Cards, placedUnits(k), now)
		p.UID = types.UID(fmt.Sprintf("uid-placed-%d", k))
		p.Status.Phase = corev1.PodRunning
		pods[k] = p
	}
	client := fake.NewClientset()
	c, err := startCache(cache.Config{PodClient: client.CoreV1(), Resources: objs.Resources}, nodes, pods)
	if err != nil {
		return nil, err
	}
	pol, err := policy.New(policy.Default)
	if err != nil {
		return nil, err
	}
	h, err := routes.New(routes.Config{Cache: c, Policy: pol, Resources: objs.Resources, Client: client})
	if err != nil {
		return nil, err
	}
	return &cluster{objs: objs, names: names, cache: c, policy: pol, handler: h.Verbs()}, nil
}

// startCache starts a cache configured by cfg over static informers of nodes and pods, for
// as long as the test binary lives, and waits until it is ready.
func startCache(cfg cache.Config, nodes, pods []runtime.Object) (*cache.Cache, error) {
	cfg.Nodes = staticInformer(&corev1.Node{}, &corev1.NodeList{}, nodes)
	cfg.Pods = staticInformer(&corev1.Pod{}, &corev1.PodList{}, pods)
	c, err := cache.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the cache: %w", err)
	}
	ctx := context.Background()
	go cfg.Nodes.Run(ctx.Done())
	go cfg.Pods.Run(ctx.Done())
	go func() { _ = c.Run(ctx) }()
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	ready := func(context.Context) (bool, error) { return c.Ready(), nil }
	if err := wait.PollUntilContextCancel(wctx, 10*time.Millisecond, true, ready); err != nil {
		return nil, fmt.Errorf("waiting for the cache to load %d nodes and %d pods: %w", len(nodes), len(pods), err)
	}
	return c, nil
}

// staticInformer is an informer whose list returns items once and whose watch never
// delivers: the cache loads exactly these objects, with no API server or fake tracker.
func staticInformer(obj runtime.Object, list runtime.Object, items []runtime.Object) toolscache.SharedIndexInformer {
	lw := &toolscache.ListWatch{
		ListFunc: func(metav1.ListOptions) (runtime.Object, error) {
			l := list.DeepCopyObject()
			if err := meta.SetList(l, items); err != nil {
				return nil, err
			}
			// The watch never ends, so there is no second list: drop the originals, so the
			// live heap holds what the extender would (informer stores and cache) and
			// nothing of this test's own making.
			items = nil
			return l, nil
		},
		WatchFunc: func(metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil },
	}
	return toolscache.NewSharedIndexInformer(listOnly{lw}, obj, 0, toolscache.Indexers{})
}

// listOnly tells the reflector to LIST rather than stream the initial objects through a
// watch (WatchListClient is on by default in client-go 0.35).
type listOnly struct{ *toolscache.ListWatch }

func (listOnly) IsWatchListSemanticsUnSupported() bool { return true }

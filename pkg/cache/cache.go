package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// DefaultReservationTTL is how long a bind-time reservation waits for its pod to show up
// bound with the allocation annotations before expiry asks the API server whether it is.
const DefaultReservationTTL = 2 * time.Minute

// Config is what New needs. Nodes and Pods are informers from the one SharedInformerFactory
// main builds (nodes already filtered by the node selector); neither may be started yet,
// because New installs the transforms that make their stores hold slim objects (*Pod and an
// unexported node type) instead of corev1 ones: listers of these informers do not work, use
// Cache.Pod.
type Config struct {
	Nodes     toolscache.SharedIndexInformer
	Pods      toolscache.SharedIndexInformer
	Resources gpushare.Resources
	// PodClient reads pods from the API server (not the informer): expiry drops a
	// reservation only once a fresh read shows its pod not bound by it. main passes the
	// clientset's CoreV1().
	PodClient corev1client.PodsGetter
	// ReservationTTL defaults to DefaultReservationTTL when zero.
	ReservationTTL time.Duration
	// UnrecordedGrace is how long a placed pod without a valid allocation record counts on
	// every card of its node before it counts against the node's free units as a whole
	// (grace.go); DefaultUnrecordedGrace when zero.
	UnrecordedGrace time.Duration
	// Clock defaults to the real clock; tests inject k8s.io/utils/clock/testing.FakeClock.
	Clock clock.WithTicker
	// TrackWorkload adds what a workload-aware policy (fgd) needs: free CPU and memory per
	// node from every bound pod, the typical pod shapes seen so far with their node
	// constraints, and the constraints each node's labels fail (ForPod, ViewEach).
	TrackWorkload bool
	// Recorder receives the Warning events about pods whose card record the cache does not
	// take as written (EventAllocationChanged, EventAllocationInvalid); nil sends none.
	Recorder record.EventRecorder
	// Shared: Nodes and Pods belong to someone else who reads full objects from them (the
	// scheduler's own informer factory, in the framework plugin), may already be started, and
	// list every node. The cache then installs no transform: its handlers derive the slim
	// objects from each event themselves, and skip nodes NodeSelector does not match (a node
	// that stops matching is removed, one that starts matching added).
	Shared bool
	// NodeSelector selects the GPU-sharing nodes when Shared (nil: every node); ignored
	// otherwise, where the node informer is built with the selector.
	NodeSelector labels.Selector
}

func (c *Config) validate() error {
	switch {
	case c.Nodes == nil:
		return errors.New("cache config: node informer is nil")
	case c.Pods == nil:
		return errors.New("cache config: pod informer is nil")
	case c.PodClient == nil:
		return errors.New("cache config: pod client is nil (expiry confirms reservations unbound with it)")
	case c.ReservationTTL < 0:
		return fmt.Errorf("cache config: reservation TTL %s is negative", c.ReservationTTL)
	case c.UnrecordedGrace < 0:
		return fmt.Errorf("cache config: unrecorded-pod grace period %s is negative", c.UnrecordedGrace)
	}
	if err := c.Resources.Validate(); err != nil {
		return fmt.Errorf("cache config: %w", err)
	}
	if c.ReservationTTL == 0 {
		c.ReservationTTL = DefaultReservationTTL
	}
	if c.UnrecordedGrace == 0 {
		c.UnrecordedGrace = DefaultUnrecordedGrace
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	return nil
}

// Cache is the per-node, per-card accounting. Create it with New, then call Run.
type Cache struct {
	res   gpushare.Resources
	ttl   time.Duration
	grace time.Duration // Config.UnrecordedGrace
	clock clock.WithTicker
	api   corev1client.PodsGetter // expiry's fresh pod reads

	// podsMu serialises every change of a pod's accounting (informer events, Reserve,
	// Finish, expiry, node removal) so a uid is held on at most one node.
	podsMu   sync.Mutex
	where    map[types.UID]string      // node holding the uid (placed or reserved); podsMu
	reserved map[types.UID]reservation // the subset of where that is a reservation; podsMu

	mu    sync.RWMutex
	nodes map[string]*nodeState
	// byObj maps the informer's node objects to their states, with Config.Shared only;
	// see indexNode. A map under a lock: sync.Map's trie costs more cache misses per lookup.
	byObjMu sync.RWMutex
	byObj   map[*corev1.Node]indexed

	// capacity is the card units of the known nodes' healthy cards, per unit size, kept by
	// the node handlers (Capacity).
	capacity capacityBook

	// hosts, shapes and constraints exist only with Config.TrackWorkload.
	hosts       *hostBook
	shapes      *shapeBook
	constraints *constraintBook

	recorder  record.EventRecorder // nil: no events
	anomalies anomalyCounters

	podStore toolscache.Store // the pod informer's, holding *Pod
	synced   []toolscache.InformerSynced
	ready    atomic.Bool
}

// New installs the slim transforms and registers the cache's handlers on the informers. It
// starts no goroutine; call Run. Errors: invalid config, or an informer that has already
// started.
func New(cfg Config) (*Cache, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Cache{
		res:      cfg.Resources,
		ttl:      cfg.ReservationTTL,
		grace:    cfg.UnrecordedGrace,
		clock:    cfg.Clock,
		api:      cfg.PodClient,
		recorder: cfg.Recorder,
		where:    map[types.UID]string{},
		reserved: map[types.UID]reservation{},
		nodes:    map[string]*nodeState{},
		byObj:    map[*corev1.Node]indexed{},
		podStore: cfg.Pods.GetStore(),
	}
	nodeHandlers := []toolscache.ResourceEventHandler{c.nodeHandler()}
	podHandlers := []toolscache.ResourceEventHandler{c.podHandler()}
	if cfg.TrackWorkload {
		c.constraints = newConstraintBook()
		c.hosts, c.shapes = newHostBook(c.constraints), newShapeBook()
		nodeHandlers = append(nodeHandlers, c.hostNodeHandler())
		podHandlers = append(podHandlers, c.hostPodHandler())
	}
	if cfg.Shared {
		return c, c.registerShared(cfg, nodeHandlers, podHandlers)
	}
	// The CPU/memory request costs a resource computation per pod event: only fgd reads it.
	if err := cfg.Pods.SetTransform(podTransform(cfg.Resources, c.constraints)); err != nil {
		return nil, fmt.Errorf("installing the pod transform: %w", err)
	}
	if err := cfg.Nodes.SetTransform(nodeTransform(cfg.Resources, cfg.TrackWorkload)); err != nil {
		return nil, fmt.Errorf("installing the node transform: %w", err)
	}
	for _, h := range nodeHandlers {
		reg, err := cfg.Nodes.AddEventHandler(h)
		if err != nil {
			return nil, fmt.Errorf("adding a node event handler: %w", err)
		}
		c.synced = append(c.synced, reg.HasSynced)
	}
	for _, h := range podHandlers {
		reg, err := cfg.Pods.AddEventHandler(h)
		if err != nil {
			return nil, fmt.Errorf("adding a pod event handler: %w", err)
		}
		c.synced = append(c.synced, reg.HasSynced)
	}
	return c, nil
}

// Run waits until the handlers have seen every existing node and pod (so every allocation
// is rebuilt from pod annotations), marks the cache ready, then until ctx is done expires
// reservations past their TTL whose pod is confirmed not bound (see Reserve) and ends the
// grace period of pods without a record on nodes that did not change meanwhile. The informers
// must be started by the caller. It returns ctx's error, or an error when ctx ends before
// the caches synced.
func (c *Cache) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("waiting for node and pod caches to sync: %w", ctx.Err())
	}
	c.ready.Store(true)
	nodes, pods := c.counts()
	logger.Info("gpushare cache ready", "nodes", nodes, "pods", pods)

	period := min(c.ttl, c.grace) / 4
	if period < time.Second {
		period = time.Second
	}
	t := c.clock.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			c.ready.Store(false)
			return ctx.Err()
		case <-t.C():
			c.expire(ctx)
			c.endGrace()
		}
	}
}

// Ready reports whether Run has rebuilt the accounting from the informers (for /readyz).
func (c *Cache) Ready() bool { return c.ready.Load() }

// counts returns the number of nodes and of pods (placed or reserved) known.
func (c *Cache) counts() (nodes, pods int) {
	c.podsMu.Lock()
	pods = len(c.where)
	c.podsMu.Unlock()
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, n := range c.nodes {
		n.mu.Lock()
		if n.known {
			nodes++
		}
		n.mu.Unlock()
	}
	return nodes, pods
}

// node returns the state of the named node, or nil.
func (c *Cache) node(name string) *nodeState {
	c.mu.RLock()
	n := c.nodes[name]
	c.mu.RUnlock()
	return n
}

// nodeOrCreate returns the state of the named node, creating an empty (unknown) one: pods
// may be seen before their node, and must still count once it appears.
func (c *Cache) nodeOrCreate(name string) *nodeState {
	if n := c.node(name); n != nil {
		return n
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.nodes[name]
	if !ok {
		n = newNodeState(name)
		c.nodes[name] = n
	}
	return n
}

// dropIfEmpty removes a node's state once it is neither a known node nor holds pods.
// Caller holds podsMu (so no pod can be added to it meanwhile).
func (c *Cache) dropIfEmpty(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.nodes[name]
	if !ok {
		return
	}
	n.mu.Lock()
	empty := !n.known && len(n.pods) == 0
	n.mu.Unlock()
	if empty {
		delete(c.nodes, name)
	}
}

package replay

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// ChurnClusterOptions configure a churn replay against a cluster (gpushare-replay churn
// --kubeconfig): kube-scheduler with the extender, or gpushare-scheduler, places the pods;
// kwok plays the nodes.
type ChurnClusterOptions struct {
	Namespace     string // namespace of the replay pods
	SchedulerName string // spec.schedulerName of the pods ("": the default scheduler)
	// Drain is how long the replay goes on after the last arrival: pods still waiting then
	// count as never placed (the offline replay drains until no event is left).
	Drain time.Duration
	// Lead is how much replay time before the metrics' window (churnWindow) is played; the
	// trace's first pods, which trickle in over most of its time, are fast-forwarded
	// (clusterChurn.t0). 0: ChurnLead.
	Lead time.Duration
}

// ChurnLead is the default ChurnClusterOptions.Lead: a minute of replay time before the window.
const ChurnLead = time.Minute

// RunChurnCluster plays o's churn stream against the cluster behind client: it creates the
// nodes, then each pod at its Arrive (replay seconds are wall seconds) and deletes it
// Duration after the scheduler bound it. The replay starts Lead before the metrics' window:
// pods that arrived before then and would be gone by then are not played (counted placed at
// once), those still running then are created first, in order, each left to run what it has
// left of its Duration, as if placed on arrival: before the window the openb traces' pods
// trickle in over most of the trace's time (an hour of wall time at the default timing)
// into a nearly idle cluster; what the scheduler does
// with waiting pods (its queues, back-off, the events that retry them) is its own. The
// cluster's allocated GPU, the pods waiting and their GPU are sampled at each event as the
// informer sees them, and the same metrics, churn.json and series as RunChurn's are
// written to o.OutDir. A pod's pending time runs from its Arrive, so time the replay
// lagged behind the stream counts. Errors: the offline options that do not apply (DRA),
// API failures, ctx cancelled.
func RunChurnCluster(ctx context.Context, client kubernetes.Interface, o ChurnOptions, co ChurnClusterOptions) (ChurnSummary, error) {
	if o.DRA != "" {
		return ChurnSummary{}, errors.New("churn on a cluster: the DRA path is not played (no --offline-dra)")
	}
	stream, nodes, borrowed, err := ChurnStreamOf(o)
	if err != nil {
		return ChurnSummary{}, err
	}
	units, err := newUnits(o.Unit, nodes)
	if err != nil {
		return ChurnSummary{}, err
	}
	d := &driver{Client: client, Objects: Objects{Units: units, Resources: gpushare.DefaultResources(),
		Namespace: co.Namespace, SchedulerName: co.SchedulerName}}
	if err := d.ensureNamespace(ctx); err != nil {
		return ChurnSummary{}, err
	}
	lead := co.Lead
	if lead <= 0 {
		lead = ChurnLead
	}
	first, last := churnWindow(stream)
	c, err := newClusterChurn(d, stream, nodes, first-lead.Seconds())
	if err != nil {
		return ChurnSummary{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop, err := d.startCluster(ctx, cancel, nodes, c.handler())
	defer stop()
	if err != nil {
		return ChurnSummary{}, err
	}
	start := time.Now()
	res, err := c.play(ctx, co.Drain)
	if err != nil {
		return ChurnSummary{}, err
	}
	s := ChurnSummary{
		Scheduler: o.Label, Policy: o.Policy, Ties: "cluster", Trace: traceName(o.PodsPath), Seed: o.Seed, Tune: o.Tune,
		ArrivalFactor: o.Timing.ArrivalFactor, DurationFactor: o.Timing.DurationFactor, Borrowed: borrowed,
		CapacityMilli: res.CapacityMilli, ChurnMetrics: churnMetrics(res, len(stream), first, last),
		OfferedLoadPct: offeredLoad(stream, res.CapacityMilli), WindowFrom: first,
		WallSeconds: time.Since(start).Seconds(), Started: start.UTC().Truncate(time.Second),
	}
	return s, writeChurn(o.OutDir, s, res, stream)
}

// clusterChurn is RunChurnCluster's state: the stream, what the informer saw of each pod,
// and the departures due.
type clusterChurn struct {
	d      *driver
	stream []ChurnPod
	// t0 is the replay time at which the replay starts: the pods that arrived before it are
	// fast-forwarded (RunChurnCluster).
	t0     float64
	byName map[string]int // pod object name → stream position
	unfit  []bool         // no empty node holds the pod

	mu      sync.Mutex
	start   time.Time
	created []bool
	bound   []bool
	gone    []bool
	// unsched marks the pods the scheduler found unschedulable (PodScheduled False,
	// reason Unschedulable) before it bound them: the pods waiting, as the offline replay's
	// queue holds them, apart from those merely on their way through the scheduler.
	unsched []bool
	alloc   int64 // GPU-milli of the bound pods not yet gone
	pending int   // waiting: found unschedulable, not yet bound
	pendGPU int64 // their GPU-milli, unfit ones left out
	res     churnResult
	due     departures // bound pods by leave time
	wake    chan struct{}
}

func newClusterChurn(d *driver, stream []ChurnPod, nodes []NodeSpec, t0 float64) (*clusterChurn, error) {
	c := &clusterChurn{d: d, stream: stream, t0: t0, byName: make(map[string]int, len(stream)), unfit: make([]bool, len(stream)),
		created: make([]bool, len(stream)), bound: make([]bool, len(stream)), gone: make([]bool, len(stream)),
		unsched: make([]bool, len(stream)),
		wake:    make(chan struct{}, 1)}
	c.res.CapacityMilli = totalGPUMilli(nodes)
	c.res.Nodes = make([]string, len(stream))
	for i, p := range stream {
		obj, err := d.Objects.Pod(p.PodSpec)
		if err != nil {
			return nil, err
		}
		if _, dup := c.byName[obj.Name]; dup {
			return nil, fmt.Errorf("two pods of the stream are named %s", obj.Name)
		}
		c.byName[obj.Name] = i
		c.unfit[i] = !fitsSomeEmptyNode(d.Objects.Units, nodes, p.PodSpec)
	}
	return c, nil
}

// fitsSomeEmptyNode says whether some node, empty, holds pod: its model, cpu, memory, cards
// and units per card (churn.fitsEmpty's rule).
func fitsSomeEmptyNode(u Units, nodes []NodeSpec, pod PodSpec) bool {
	perCard := u.PodUnitsPerCard(pod)
	for _, s := range nodes {
		if pod.AllowsModel(s.Model) && pod.MilliCPU <= s.MilliCPU && pod.MemoryMiB <= s.MemoryMiB &&
			pod.NumGPU <= s.GPUs && perCard <= u.CardUnits(s.Model) {
			return true
		}
	}
	return false
}

// play creates the pods at their arrival times and deletes them when due, until drain after
// the last arrival; then it counts the pods still waiting.
func (c *clusterChurn) play(ctx context.Context, drain time.Duration) (churnResult, error) {
	c.mu.Lock()
	c.start = time.Now()
	c.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); c.departLoop(ctx) }()
	err := c.arrive(ctx)
	if err == nil {
		end := c.wall(c.stream[len(c.stream)-1].Arrive).Add(drain)
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-time.After(time.Until(end)):
		}
	}
	cancel()
	wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, p := range c.stream {
		if c.created[i] && !c.bound[i] {
			c.res.NeverPlaced++
			if p.NumGPU > 0 {
				c.res.NeverPlacedGPU++
			}
			if c.unfit[i] {
				c.res.NeverFit++
			}
		}
	}
	return c.res, err
}

// arrive creates each pod of the stream at its arrival time.
func (c *clusterChurn) arrive(ctx context.Context) error {
	for i, p := range c.stream {
		if p.Arrive < c.t0 && p.Arrive+p.Duration <= c.t0 {
			c.mu.Lock()
			c.res.Nodes[i] = "-" // gone before the replay starts: not played
			c.res.Waits = append(c.res.Waits, 0)
			c.mu.Unlock()
			continue
		}
		if wait := time.Until(c.wall(p.Arrive)); wait > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
		}
		obj, err := c.d.Objects.Pod(p.PodSpec)
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.created[i] = true
		c.mu.Unlock()
		if _, err := c.d.Client.CoreV1().Pods(obj.Namespace).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating pod %s: %w", obj.Name, err)
		}
	}
	return nil
}

// departLoop deletes each bound pod when its run time is over.
func (c *clusterChurn) departLoop(ctx context.Context) {
	for {
		c.mu.Lock()
		var next *running
		if len(c.due) > 0 {
			r := c.due[0]
			next = &r
		}
		c.mu.Unlock()
		wait := time.Hour
		if next != nil {
			wait = time.Until(c.wall(next.leave))
		}
		if wait <= 0 {
			c.mu.Lock()
			heap.Pop(&c.due)
			c.mu.Unlock()
			c.delete(ctx, next.pod)
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		case <-time.After(wait):
		}
	}
}

// delete deletes pod i at once (kwok runs no kubelet to wait for).
func (c *clusterChurn) delete(ctx context.Context, i int) {
	obj, err := c.d.Objects.Pod(c.stream[i].PodSpec)
	if err != nil {
		return
	}
	var zero int64
	err = c.d.Client.CoreV1().Pods(obj.Namespace).Delete(ctx, obj.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		klog.ErrorS(err, "Deleting a replay pod whose run time is over", "pod", obj.Name)
	}
}

// handler follows the replay pods: bound (spec.nodeName set) and gone.
func (c *clusterChurn) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onPod(obj, false) },
		UpdateFunc: func(_, obj any) { c.onPod(obj, false) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			c.onPod(obj, true)
		},
	}
}

func (c *clusterChurn) onPod(obj any, deleted bool) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	i, ok := c.byName[pod.Name]
	if !ok {
		return
	}
	p := c.stream[i]
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.start.IsZero() || !c.created[i] || c.gone[i] {
		return
	}
	now := c.now()
	switch {
	case !c.bound[i] && pod.Spec.NodeName != "" && !deleted:
		c.bound[i] = true
		c.res.Nodes[i] = pod.Spec.NodeName
		leave := now + p.Duration
		switch {
		case p.Arrive < c.t0: // fast-forwarded: placed on arrival, what is left of its run
			leave = p.Arrive + p.Duration
			c.res.Waits = append(c.res.Waits, 0)
		case c.unsched[i]:
			c.res.Waits = append(c.res.Waits, math.Max(0, now-p.Arrive))
			c.setWaiting(i, false)
		default: // placed on its first try: its scheduling latency is no wait
			c.res.Waits = append(c.res.Waits, 0)
		}
		c.alloc += p.TotalGPUMilli()
		if !math.IsInf(p.Duration, 1) {
			heap.Push(&c.due, running{leave: leave, pod: i})
			select {
			case c.wake <- struct{}{}:
			default:
			}
		}
	case deleted && c.bound[i]:
		c.gone[i] = true
		c.alloc -= p.TotalGPUMilli()
	case !c.bound[i] && !c.unsched[i] && !deleted && unschedulable(pod):
		c.setWaiting(i, true)
	default:
		return
	}
	c.sampleLocked()
}

// setWaiting counts pod i among the waiting pods, or no longer.
func (c *clusterChurn) setWaiting(i int, waiting bool) {
	c.unsched[i] = waiting
	n, milli := 1, c.stream[i].TotalGPUMilli()
	if !waiting {
		n, milli = -1, -milli
	}
	c.pending += n
	if !c.unfit[i] {
		c.pendGPU += milli
	}
}

// unschedulable says whether the scheduler marked pod unschedulable.
func unschedulable(pod *corev1.Pod) bool {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// now is the replay time: t0 at the start.
func (c *clusterChurn) now() float64 { return c.t0 + time.Since(c.start).Seconds() }

// wall is the wall time of replay time t (t0: the start; earlier times: the start).
func (c *clusterChurn) wall(t float64) time.Time {
	return c.start.Add(time.Duration(math.Max(0, t-c.t0) * float64(time.Second)))
}

// sampleLocked records the state now, replacing a sample of the same time.
func (c *clusterChurn) sampleLocked() {
	s := ChurnSample{Time: c.now(), AllocatedMilli: c.alloc, PendingPods: c.pending, PendingGPUMilli: c.pendGPU}
	if k := len(c.res.Samples); k > 0 && c.res.Samples[k-1].Time == s.Time {
		c.res.Samples[k-1] = s
		return
	}
	c.res.Samples = append(c.res.Samples, s)
}

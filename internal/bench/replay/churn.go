package replay

import (
	"container/heap"
	"context"
	"fmt"
	"math"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// ChurnSample is the cluster right after the events at one replay time.
type ChurnSample struct {
	Time           float64 // replay seconds
	AllocatedMilli int64   // GPU request of the pods running, GPU-milli
	PendingPods    int     // pods waiting, CPU-only ones and those that never fit included
	// PendingGPUMilli is the GPU request of the pods waiting that an empty node could hold,
	// GPU-milli.
	PendingGPUMilli int64
}

// churnResult is what replayChurn saw.
type churnResult struct {
	CapacityMilli int64
	Samples       []ChurnSample
	// Nodes is where each pod of the stream ran first ("" never placed), in stream order.
	Nodes []string
	// Waits is each placed pod's pending time, replay seconds, in placement order.
	Waits []float64
	// NeverPlaced counts the pods still waiting when no departure was left to free room;
	// NeverPlacedGPU those of them with a GPU request, NeverFit those no empty node holds.
	NeverPlaced, NeverPlacedGPU, NeverFit int
}

// running is a placed pod until it leaves.
type running struct {
	leave float64
	pod   int // position in the stream
	node  int // position in offline.state
	usage gpushare.CardUnits
}

// departures is a min-heap of running pods by leave time, then stream position.
type departures []running

func (d departures) Len() int { return len(d) }
func (d departures) Less(i, j int) bool {
	if d[i].leave != d[j].leave {
		return d[i].leave < d[j].leave
	}
	return d[i].pod < d[j].pod
}
func (d departures) Swap(i, j int) { d[i], d[j] = d[j], d[i] }
func (d *departures) Push(x any)   { *d = append(*d, x.(running)) }
func (d *departures) Pop() any {
	old := *d
	r := old[len(old)-1]
	*d = old[:len(old)-1]
	return r
}

// churn is replayChurn's state.
type churn struct {
	o       *offline
	learn   *learner
	cur     policy.Policy // the policy of the latest arrival: retries use it
	stream  []ChurnPod
	nodes   []NodeSpec
	nodeIdx map[string]int
	running departures
	pending []int // stream positions, FIFO
	// unfit marks the pods that no empty node holds (set when a pod first waits).
	unfit   map[int]bool
	res     churnResult
	alloc   int64
	pendGPU int64
}

// replayChurn is a discrete-event replay of stream on nodes with cfg's scheduler (as
// replayOffline places): events are arrivals (stream order, at Arrive) and departures (a
// placed pod leaves Duration after it was placed); at equal times departures come first.
// An arriving pod is placed at once or joins the FIFO pending queue. Every departure retries
// the whole queue in order, each pod that now fits placed where the scheduler chooses: as
// kube-scheduler moves unschedulable pods back to its active queue on a pod deletion.
// Back-off and the periodic flush of unschedulable pods are not modelled: nothing but a
// departure frees room, so a retry at another time would find no fit either. The replay
// ends when no event is left; the pods then waiting never fit. Errors: a bad cfg, ctx
// cancelled.
func replayChurn(ctx context.Context, cfg offlineConfig, nodes []NodeSpec, stream []ChurnPod) (churnResult, error) {
	o, capacity, err := newOffline(cfg, nodes)
	if err != nil {
		return churnResult{}, err
	}
	c := &churn{o: o, learn: newLearner(o.cfg.Policy, capacity), stream: stream, nodes: nodes, nodeIdx: map[string]int{}, unfit: map[int]bool{}}
	c.res.CapacityMilli = totalGPUMilli(nodes)
	c.res.Nodes = make([]string, len(stream))
	for i, n := range o.state {
		c.nodeIdx[n.spec.Name] = i
	}
	next := 0 // next arrival
	for events := 0; next < len(stream) || len(c.running) > 0; events++ {
		if events%256 == 0 {
			if err := ctx.Err(); err != nil {
				return c.res, err
			}
		}
		var now float64
		if len(c.running) > 0 && (next == len(stream) || c.running[0].leave <= stream[next].Arrive) {
			r := heap.Pop(&c.running).(running)
			now = r.leave
			c.depart(r, now)
		} else {
			now = stream[next].Arrive
			c.arrive(next, now)
			next++
		}
		c.sample(now)
	}
	for _, i := range c.pending {
		c.res.NeverPlaced++
		if stream[i].NumGPU > 0 {
			c.res.NeverPlacedGPU++
		}
		if c.unfit[i] {
			c.res.NeverFit++
		}
	}
	return c.res, nil
}

// arrive tries pod i at once, or queues it.
func (c *churn) arrive(i int, now float64) {
	c.cur = c.learn.next(c.o, c.stream[i].PodSpec)
	if node := c.o.place(c.cur, c.stream[i].PodSpec); node != "" {
		c.start(i, node, now)
		return
	}
	c.pending = append(c.pending, i)
	if c.fitsEmpty(c.stream[i].PodSpec) {
		c.pendGPU += c.stream[i].TotalGPUMilli()
	} else {
		c.unfit[i] = true
	}
}

// fitsEmpty says whether some node, empty, holds pod: its model, cpu, memory, cards and
// units per card. A pod that fits none waits for ever and is left out of the pending GPU
// request, which would otherwise count the whole replay as waiting.
func (c *churn) fitsEmpty(pod PodSpec) bool {
	return fitsSomeEmptyNode(c.o.cfg.Units, c.nodes, pod)
}

// start records pod i placed on node at now and schedules its departure.
func (c *churn) start(i int, node string, now float64) {
	p := c.stream[i]
	c.res.Nodes[i] = node
	c.res.Waits = append(c.res.Waits, now-p.Arrive)
	c.alloc += p.TotalGPUMilli()
	if !math.IsInf(p.Duration, 1) {
		heap.Push(&c.running, running{leave: now + p.Duration, pod: i, node: c.nodeIdx[node], usage: c.o.lastUsage})
	}
}

// depart frees r's resources and retries the pending queue. A pending pod failed on every
// node when it was last tried, and since then only r's node gained room, so a pod that
// does not fit there is not tried elsewhere.
func (c *churn) depart(r running, now float64) {
	p := c.stream[r.pod].PodSpec
	n := c.o.state[r.node]
	n.policy.Host.CPUMilli += p.MilliCPU
	n.policy.Host.MemoryMiB += p.MemoryMiB
	n.load.remove(p.MilliCPU, p.MemoryMiB)
	n.pods--
	for k := range n.policy.Cards {
		n.policy.Cards[k].Used -= r.usage[n.policy.Cards[k].Index]
	}
	c.alloc -= p.TotalGPUMilli()
	kept := c.pending[:0]
	for _, i := range c.pending {
		pod := c.stream[i].PodSpec
		if c.fitsOn(n, pod) {
			if node := c.o.place(c.cur, pod); node != "" {
				if !c.unfit[i] {
					c.pendGPU -= pod.TotalGPUMilli()
				}
				c.start(i, node, now)
				continue
			}
		}
		kept = append(kept, i)
	}
	c.pending = kept
}

// fitsOn says whether pod passes the scheduler's filters on n.
func (c *churn) fitsOn(n *offlineNode, pod PodSpec) bool {
	if !n.admits(pod, c.o.cfg.Units.PodUnitsPerCard(pod)) {
		return false
	}
	if c.o.cfg.DRA != "" {
		return true // admits' card check is the DRA allocator's fit (placeDRA)
	}
	host := policy.Host{CPUMilli: pod.MilliCPU, MemoryMiB: pod.MemoryMiB}
	_, ok := policy.NewScorer(c.cur, podRequest(c.o.cfg.Units, pod), host).Score(n.policy)
	return ok
}

// sample records the state at now, replacing a sample of the same time.
func (c *churn) sample(now float64) {
	s := ChurnSample{Time: now, AllocatedMilli: c.alloc, PendingPods: len(c.pending), PendingGPUMilli: c.pendGPU}
	if k := len(c.res.Samples); k > 0 && c.res.Samples[k-1].Time == now {
		c.res.Samples[k-1] = s
		return
	}
	c.res.Samples = append(c.res.Samples, s)
}

// remove takes back what add accounted.
func (l *hostLoad) remove(milliCPU, memoryMiB int64) {
	l.reqCPU -= milliCPU
	l.reqMem -= memoryMiB
	nzCPU, nzMem := nonZeroRequests(milliCPU, memoryMiB)
	l.nonZeroCPU -= nzCPU
	l.nonZeroMem -= nzMem
}

// String is for test failures.
func (s ChurnSample) String() string {
	return fmt.Sprintf("t=%g alloc=%d pending=%d/%d", s.Time, s.AllocatedMilli, s.PendingPods, s.PendingGPUMilli)
}

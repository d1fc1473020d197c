package replay

import (
	"maps"
	"slices"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// defragPlans is how many of the cheapest nodes defragmenter.rescue tries for one pod.
const defragPlans = 20

// defragmenter emulates, in an offline replay, the most a defragmenter could do for a pod
// that fits nowhere: free room for it on one node by moving at most budget of that node's
// GPU pods (every pod counted movable) to other nodes, each placed there by the policy as a
// new pod, and counting each move as an eviction. It keeps which pods each node holds and
// what they use there; CPU-only pods are never moved.
type defragmenter struct {
	budget    int
	evictions int
	placed    []defragPod
	onNode    [][]int // positions in placed of the pods each node held (moved ones stay, not alive)
	index     map[string]int
}

// defragPod is one placement: the pod, its node (position in offline.state), its units per
// card there; alive is false once it was moved away.
type defragPod struct {
	pod   PodSpec
	node  int
	usage gpushare.CardUnits
	alive bool
}

func newDefragmenter(o *offline, budget int) *defragmenter {
	d := &defragmenter{budget: budget, onNode: make([][]int, len(o.state)), index: make(map[string]int, len(o.state))}
	for i, n := range o.state {
		d.index[n.spec.Name] = i
	}
	return d
}

// record notes that pod went to the node named node with usage (offline.lastUsage).
func (d *defragmenter) record(pod PodSpec, node string, usage gpushare.CardUnits) {
	if pod.NumGPU == 0 || node == "" {
		return
	}
	i := d.index[node]
	d.placed = append(d.placed, defragPod{pod: pod, node: i, usage: maps.Clone(usage), alive: true})
	d.onNode[i] = append(d.onNode[i], len(d.placed)-1)
}

// defragPlan is one node where moving evict (positions in placed) makes room for the pod.
type defragPlan struct {
	node  int
	evict []int
}

// rescue places pod, which fits nowhere, by moving at most budget pods off one node: of the
// nodes whose model the pod allows, those where evicting the pods that use most of each
// card (largest first) frees pod.NumGPU cards with the pod's share and the host room it
// asks, fewest moves first. The first plan whose moved pods all find another place is
// kept; a plan that fails is undone. Returns the node's name, "" when no plan works.
func (d *defragmenter) rescue(o *offline, p policy.Policy, pod PodSpec) string {
	if pod.NumGPU == 0 || d.budget <= 0 {
		return ""
	}
	plans := d.plans(o, pod)
	for _, pl := range plans[:min(len(plans), defragPlans)] {
		if node := d.try(o, p, pod, pl); node != "" {
			d.evictions += len(pl.evict)
			return node
		}
	}
	return ""
}

// plans are the nodes where at most budget moves free room for pod, fewest moves first.
func (d *defragmenter) plans(o *offline, pod PodSpec) []defragPlan {
	perCard := o.cfg.Units.PodUnitsPerCard(pod)
	var plans []defragPlan
	for i, n := range o.state {
		if !pod.AllowsModel(n.spec.Model) || len(n.policy.Cards) < pod.NumGPU {
			continue
		}
		var cards [][]int // per card that can be freed: the pods to move off it
		for _, c := range n.policy.Cards {
			if !c.Healthy {
				continue
			}
			on := d.usersOf(i, c.Index)
			free := c.Total - c.Used
			var evict []int
			for _, pi := range on {
				if free >= perCard {
					break
				}
				free += d.placed[pi].usage[c.Index]
				evict = append(evict, pi)
			}
			if free >= perCard {
				cards = append(cards, evict)
			}
		}
		if len(cards) < pod.NumGPU {
			continue
		}
		slices.SortStableFunc(cards, func(a, b []int) int { return len(a) - len(b) })
		var evict []int
		for _, c := range cards[:pod.NumGPU] {
			for _, pi := range c {
				if !slices.Contains(evict, pi) {
					evict = append(evict, pi)
				}
			}
		}
		if len(evict) == 0 || len(evict) > d.budget {
			continue
		}
		host := *n.policy.Host
		for _, pi := range evict {
			host.CPUMilli += d.placed[pi].pod.MilliCPU
			host.MemoryMiB += d.placed[pi].pod.MemoryMiB
		}
		if host.CPUMilli < pod.MilliCPU || host.MemoryMiB < pod.MemoryMiB {
			continue
		}
		plans = append(plans, defragPlan{node: i, evict: evict})
	}
	slices.SortStableFunc(plans, func(a, b defragPlan) int { return len(a.evict) - len(b.evict) })
	return plans
}

// usersOf are the live pods on node i using card index, largest use first.
func (d *defragmenter) usersOf(i, card int) []int {
	var on []int
	for _, pi := range d.onNode[i] {
		if d.placed[pi].alive && d.placed[pi].usage[card] > 0 {
			on = append(on, pi)
		}
	}
	slices.SortStableFunc(on, func(a, b int) int {
		return int(d.placed[b].usage[card] - d.placed[a].usage[card])
	})
	return on
}

// try carries out pl: the pods leave the node, pod is placed there by the policy, and each
// moved pod is placed again by the policy on any node. Undone, "" returned, when any of that
// fails.
func (d *defragmenter) try(o *offline, p policy.Policy, pod PodSpec, pl defragPlan) string {
	saved := o.snapshot()
	placed, lens := len(d.placed), make([]int, len(d.onNode))
	for i := range d.onNode {
		lens[i] = len(d.onNode[i])
	}
	undo := func() {
		o.restore(saved)
		for _, pi := range pl.evict {
			d.placed[pi].alive = true
		}
		d.placed = d.placed[:placed]
		for i := range d.onNode {
			d.onNode[i] = d.onNode[i][:lens[i]]
		}
	}
	n := o.state[pl.node]
	for _, pi := range pl.evict {
		e := &d.placed[pi]
		e.alive = false
		n.policy.Host.CPUMilli += e.pod.MilliCPU
		n.policy.Host.MemoryMiB += e.pod.MemoryMiB
		n.load.remove(e.pod.MilliCPU, e.pod.MemoryMiB)
		n.pods--
		for k := range n.policy.Cards {
			n.policy.Cards[k].Used -= e.usage[n.policy.Cards[k].Index]
		}
	}
	place, err := p.Place(n.policy, podRequest(o.cfg.Units, pod))
	if err != nil || !n.admits(pod, o.cfg.Units.PodUnitsPerCard(pod)) {
		undo()
		return ""
	}
	name := o.apply(n, pod, place)
	d.record(pod, name, place.Usage)
	for _, pi := range pl.evict {
		moved := d.placed[pi].pod
		to := o.place(p, moved)
		if to == "" {
			undo()
			return ""
		}
		d.record(moved, to, o.lastUsage)
	}
	return name
}

// offlineSnapshot is every node's free resources, cards and pod count.
type offlineSnapshot []offlineNodeState

type offlineNodeState struct {
	host  policy.Host
	cards []policy.Card
	pods  int
	load  hostLoad
}

func (o *offline) snapshot() offlineSnapshot {
	s := make(offlineSnapshot, len(o.state))
	for i, n := range o.state {
		s[i] = offlineNodeState{host: *n.policy.Host, cards: slices.Clone(n.policy.Cards), pods: n.pods, load: n.load}
	}
	return s
}

func (o *offline) restore(s offlineSnapshot) {
	for i, n := range o.state {
		*n.policy.Host, n.pods, n.load = s[i].host, s[i].pods, s[i].load
		copy(n.policy.Cards, s[i].cards)
	}
}

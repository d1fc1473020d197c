package cache

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// DefaultUnrecordedGrace is how long a placed pod without a valid allocation record is counted
// on every card of its node before it is counted against the node's free units as a whole.
const DefaultUnrecordedGrace = 2 * time.Minute

// EventUnrecordedPod: a placed pod has shown no valid allocation record for the whole grace
// period; it is now counted against its node's free units as a whole. Sent on the pod and on
// its node, once.
const EventUnrecordedPod = "GPUShareUnrecordedPod"

// graceClock is what deciding an unrecorded pod needs of time: now, to note when the pod
// was first counted without a record, and the grace period after which it is charged to
// the node's free units instead of every card.
type graceClock struct {
	now   time.Time
	grace time.Duration
}

func (c *Cache) graceClock() graceClock { return graceClock{now: c.clock.Now(), grace: c.grace} }

// unrecorded reports a basis of a pod that never showed a valid record.
func (b basis) unrecorded() bool { return b == basisConservative || b == basisCharged }

// decideUnrecorded sets what a pod that never showed a valid record counts: its peak
// per-card need on every card (it may be on any of them) until the grace period since the
// cache first counted it so has passed; then basisCharged, whose usage recompute sets once
// every other pod is counted (charge). Caller holds n.mu.
func (n *nodeState) decideUnrecorded(e *podEntry, at graceClock) {
	since, ok := n.unrecorded[e.uid]
	if !ok {
		if n.unrecorded == nil {
			n.unrecorded = map[types.UID]time.Time{}
		}
		n.unrecorded[e.uid], since = at.now, at.now
	}
	if !at.now.Before(since.Add(at.grace)) {
		e.basis = basisCharged
		return
	}
	e.basis = basisConservative
	e.setCounted(n.onEveryCard(n.inNodeUnits(e.Pod, e.peakPerCard())))
}

// graceEnded reports whether a pod counted on every card has passed its grace period: the
// node must be recomputed even though nothing about it changed. Caller holds n.mu.
func (n *nodeState) graceEnded(at graceClock) bool {
	for uid, since := range n.unrecorded {
		if e, ok := n.pods[uid]; ok && e.basis == basisConservative && !at.now.Before(since.Add(at.grace)) {
			return true
		}
	}
	return false
}

// charge counts the charged entries (basisCharged; fresh: just became so) against the
// node's free units, in UID order, used holding the units every other pod counts per card.
// Each takes its total units from the cards with the least free first: the node's free
// total drops by the pod's units, and the cards with the most free keep it as long as the
// others can absorb the charge, so a pod that fits beside the unrecorded one still finds a
// card. The cards the pod really uses are unknown; the charge is recomputed with every
// change of the node, never exceeding a card's free units (what does not fit now is charged
// as units free up). Fresh entries queue EventUnrecordedPod. Caller holds n.mu.
func (n *nodeState) charge(charged []chargedEntry, used map[int]int64, at graceClock) {
	slices.SortFunc(charged, func(a, b chargedEntry) int { return cmp.Compare(a.uid, b.uid) })
	for _, ce := range charged {
		e := ce.podEntry
		units := n.inNodeUnits(e.Pod, e.chargeUnits())
		e.setCounted(n.fillLeastFree(units, used))
		for _, u := range e.counted() {
			used[u.card] += u.units
		}
		if !ce.fresh {
			continue
		}
		n.notices = append(n.notices, notice{pod: e.Pod, reason: EventUnrecordedPod, onNode: true,
			msg: fmt.Sprintf("pod %s/%s requests %d units on node %s without an allocation record for longer than %s; "+
				"it is counted against the node's free memory as a whole, no longer on every card: %s "+
				"(the cards it uses are unknown: a pod placed beside it may over-commit one until its record appears or it ends)",
				e.namespace, e.name, units, n.name, at.grace, usageString(e.counted()))})
	}
}

// chargedEntry is an entry charged to the node's free units, and whether it just became so.
type chargedEntry struct {
	*podEntry
	fresh bool
}

// fillLeastFree takes units from the healthy cards' free units (each card's size minus
// used), the least free first (ties: the lower index), and returns what it took per card in
// card order. It takes less than units only when the cards' free units run out. Caller
// holds n.mu.
func (n *nodeState) fillLeastFree(units int64, used map[int]int64) cardUsage {
	type slot struct {
		card int
		free int64
	}
	var slots []slot
	for _, d := range n.devices {
		if free := d.Units - used[d.Index]; d.Healthy && free > 0 {
			slots = append(slots, slot{d.Index, free})
		}
	}
	// devices are in index order, and a stable sort keeps it among equals.
	slices.SortStableFunc(slots, func(a, b slot) int { return cmp.Compare(a.free, b.free) })
	var out cardUsage
	for _, s := range slots {
		if units <= 0 {
			break
		}
		take := min(units, s.free)
		out = append(out, cardUse{card: s.card, units: take})
		units -= take
	}
	slices.SortFunc(out, func(a, b cardUse) int { return cmp.Compare(a.card, b.card) })
	return out
}

// chargeUnits is the gpu-mem units a pod without a valid record is charged to its node: the
// request's TotalUnits; for an invalid request, peakPerCard's stand-in (its raw gpu-mem, or
// a whole card), so that it never counts as nothing.
func (p *Pod) chargeUnits() int64 {
	if p.requestErr() != nil {
		return p.peakPerCard()
	}
	return p.request().TotalUnits()
}

// endGrace recomputes the nodes holding a pod whose grace period has passed since the node
// last changed (nothing else would recompute a quiet node), and sends what that decides.
func (c *Cache) endGrace() {
	at := c.graceClock()
	c.mu.RLock()
	nodes := make([]*nodeState, 0, len(c.nodes))
	for _, n := range c.nodes {
		nodes = append(nodes, n)
	}
	c.mu.RUnlock()
	for _, n := range nodes {
		n.mu.Lock()
		if len(n.unrecorded) == 0 || !n.graceEnded(at) {
			n.mu.Unlock()
			continue
		}
		n.recompute(at)
		notices := n.takeNotices()
		n.mu.Unlock()
		c.send(notices)
	}
}

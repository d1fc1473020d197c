package cache

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Event reasons the cache emits on a pod whose card record it does not take as written.
const (
	// EventAllocationChanged: a placed pod showed a valid allocation other than the one it
	// is counted with; it now counts the per-card maximum of both.
	EventAllocationChanged = "GPUShareAllocationChanged"
	// EventAllocationInvalid: a placed pod shows no valid allocation (none, unreadable, not
	// matching its request, or naming cards the node lacks), or its request is invalid.
	EventAllocationInvalid = "GPUShareAllocationInvalid"
)

// basis says how an entry's counted usage was decided.
type basis uint8

const (
	// basisUndecided: the node is not known yet; the pod's own valid record counts until
	// the inventory arrives and the entry is decided.
	basisUndecided basis = iota
	// basisReserved: Reserve's hold for a bind; the pod has not shown up bound yet.
	basisReserved
	// basisRecord: the reservation or the first valid record is trusted; the pod counts it
	// and its current valid record, per card maximum (an invalid record changes nothing).
	basisRecord
	// basisConservative: no valid record ever seen: the pod's peak per-card need on every
	// card of the node (bounded by each card's size), for the grace period (grace.go).
	basisConservative
	// basisCharged: no valid record seen for longer than the grace period: the pod's total
	// units against the node's free units as a whole (nodeState.charge).
	basisCharged
)

// recordState is what the pod's latest object says about its cards.
type recordState uint8

const (
	recordOK      recordState = iota // a valid allocation on cards the node has
	recordInvalid                    // unreadable, not matching the request, unknown cards, or invalid request
	recordMissing                    // no card annotation at all
	// recordOtherUnit: a valid allocation in another unit than the node's: its counts, and
	// any usage trusted before the node's unit changed, are of another size.
	recordOtherUnit
)

// podEntry is one pod's accounting on a node: the informer's Pod (shared, never modified;
// for a reservation, the one Reserve built) plus the usage that counts, which need not be
// what the Pod's annotations say: tenants can edit those.
//
// One entry per placed pod: 24 bytes, because the usage that counts is almost always the
// Pod's own and is then not stored again.
type podEntry struct {
	*Pod
	// own is the usage that counts when it is not the Pod's usage (nil: it is).
	own   *cardUsage
	basis basis
	state recordState // of the Pod last decided on; events are sent on its changes only
}

// reservedEntry is the entry of a reservation: it counts the cards the Pod (built by Reserve,
// reserved set) holds.
func reservedEntry(p *Pod) *podEntry {
	return &podEntry{Pod: p, basis: basisReserved}
}

// counted is the gpu-mem units per card that count on the node. Do not modify it.
func (e *podEntry) counted() cardUsage {
	if e.own != nil {
		return *e.own
	}
	return e.usage
}

// setCounted makes u the usage that counts.
func (e *podEntry) setCounted(u cardUsage) {
	if sameSlice(u, e.usage) {
		e.own = nil
		return
	}
	e.own = &u
}

// setPod replaces the entry's Pod by a newer object of the same pod; what counts stays until
// decided again.
func (e *podEntry) setPod(p *Pod) {
	c := e.counted()
	e.Pod = p
	e.setCounted(c)
}

func sameSlice(a, b cardUsage) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// notice is an event to send about a pod once the node lock is released.
type notice struct {
	pod    *Pod
	reason string // EventAllocationChanged, EventAllocationInvalid or EventUnrecordedPod
	// anomaly is the label of gpushare_pod_allocation_anomalies_total: "invalid",
	// "changed" or "missing"; "" counts nothing.
	anomaly string
	msg     string
	// onNode: the event goes to the pod's node as well (what holds the node's units).
	onNode bool
}

// Anomaly labels (AnomalyCounts' fields, the reasons of the metric).
const (
	AnomalyInvalid = "invalid"
	AnomalyChanged = "changed"
	AnomalyMissing = "missing"
)

// stateOf classifies the pod's record against the node's inventory (when the node is known).
// Caller holds n.mu.
func (n *nodeState) stateOf(p *Pod) recordState {
	switch {
	case p.requestErr() != nil:
		return recordInvalid
	case !p.recorded:
		return recordMissing
	case !p.validRecord():
		return recordInvalid
	case n.known && n.otherUnit(p):
		return recordOtherUnit
	case n.known:
		for _, u := range p.usage {
			if _, ok := n.device(u.card); !ok {
				return recordInvalid
			}
		}
	}
	return recordOK
}

// decide sets what the entry counts from its current Pod and the node's inventory, and
// queues a notice when that decision changes for the worse. It is idempotent: deciding
// again on the same Pod, inventory and side of the grace period changes nothing and queues
// nothing. A charged entry's usage is left to recompute (charge). Caller holds n.mu.
func (n *nodeState) decide(e *podEntry, at graceClock) {
	p := e.Pod
	switch {
	case p.reserved:
		e.basis = basisReserved
		e.setCounted(p.usage)
		return
	case !n.known && e.basis == basisUndecided:
		e.setCounted(nil)
		if p.validRecord() {
			e.setCounted(p.usage)
		}
		return
	}
	state := n.stateOf(p)
	trusted := e.basis == basisReserved || e.basis == basisRecord
	changed := false
	switch {
	case state == recordOtherUnit:
		// What was trusted counts in the old unit too: neither says what the pod holds now.
		delete(n.trust, p.uid)
		n.decideUnrecorded(e, at)
	case state == recordOK && !trusted:
		e.basis = basisRecord
		delete(n.trust, p.uid)
		e.setCounted(p.usage)
	case state == recordOK:
		// Counted: the trusted usage and the current record, per card maximum. A record
		// moved to another card frees nothing; one put back to the trusted cards (share-plugin
		// restores what it served) counts them alone again.
		e.basis = basisRecord
		cur, trust := e.counted(), n.trustedOf(e)
		if slices.Equal(trust, p.usage) {
			delete(n.trust, p.uid)
			e.setCounted(p.usage) // share the Pod's
			break
		}
		if n.trust == nil {
			n.trust = map[types.UID]cardUsage{}
		}
		n.trust[p.uid] = trust
		if merged := union(trust, p.usage); !slices.Equal(merged, cur) {
			e.setCounted(merged)
			changed = !slices.Equal(merged, trust)
		}
	case trusted:
		e.basis = basisRecord
	default:
		n.decideUnrecorded(e, at)
	}
	prev := e.state
	e.state = state
	switch {
	case changed:
		n.notices = append(n.notices, notice{pod: p, reason: EventAllocationChanged, anomaly: AnomalyChanged,
			msg: fmt.Sprintf("allocation changed to %s; counted %s (the trusted allocation and the current one)",
				usageString(p.usage), usageString(e.counted()))})
	case state == prev || state == recordOK:
	default:
		n.notices = append(n.notices, n.invalidNotice(e, at.grace))
	}
}

// trustedOf is the usage the entry was first trusted with (its reservation or first valid
// record): kept in n.trust while the counted usage differs from it. Caller holds n.mu.
func (n *nodeState) trustedOf(e *podEntry) cardUsage {
	if t, ok := n.trust[e.Pod.uid]; ok {
		return t
	}
	return e.counted()
}

func (n *nodeState) invalidNotice(e *podEntry, grace time.Duration) notice {
	p := e.Pod
	anomaly := AnomalyInvalid
	if e.state == recordMissing {
		anomaly = AnomalyMissing
	}
	found := p.record()
	switch {
	case !p.recorded:
		found = "no allocation annotation"
	case found == "": // a valid allocation on cards the node lacks
		found = "allocation " + usageString(p.usage)
	}
	why := "not a valid allocation"
	switch {
	case p.requestErr() != nil:
		why = fmt.Sprintf("invalid gpu-mem request (%v)", p.requestErr())
	case p.allocErr() != nil:
		why = p.allocErr().Error()
	case e.state == recordOtherUnit:
		why = fmt.Sprintf("it counts in %s, node %s counts in %s", p.unit, n.name, n.nodeUnit())
	case e.state == recordInvalid:
		why = "it names cards the node does not have"
	}
	var msg string
	switch e.basis {
	case basisConservative:
		msg = fmt.Sprintf("%s: %s; counted on every card of node %s until a valid record appears, for %s at most: %s",
			found, why, n.name, grace, usageString(e.counted()))
	case basisCharged:
		msg = fmt.Sprintf("%s: %s; counted against the free units of node %s as a whole until a valid record appears",
			found, why, n.name)
	default:
		msg = fmt.Sprintf("%s: %s; still counted %s", found, why, usageString(e.counted()))
	}
	return notice{pod: p, reason: EventAllocationInvalid, anomaly: anomaly, msg: msg}
}

// takeNotices returns and clears the queued notices. Caller holds n.mu.
func (n *nodeState) takeNotices() []notice {
	out := n.notices
	n.notices = nil
	return out
}

// onEveryCard is units on every card of the inventory, each bounded by the card's size.
// Caller holds n.mu.
func (n *nodeState) onEveryCard(units int64) cardUsage {
	if len(n.devices) == 0 {
		return nil
	}
	out := make(cardUsage, 0, len(n.devices))
	for _, d := range n.devices {
		out = append(out, cardUse{card: d.Index, units: min(units, max(d.Units, 0))})
	}
	return out
}

// union is the per-card maximum of a and b, in ascending card order.
func union(a, b cardUsage) cardUsage {
	out := make(cardUsage, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i].card < b[j].card):
			out = append(out, a[i])
			i++
		case i == len(a) || b[j].card < a[i].card:
			out = append(out, b[j])
			j++
		default:
			out = append(out, cardUse{card: a[i].card, units: max(a[i].units, b[j].units)})
			i, j = i+1, j+1
		}
	}
	return out
}

// usageString writes usage as "card0=16 card1=8" units ("nothing" when empty).
func usageString(u cardUsage) string {
	if len(u) == 0 {
		return "nothing"
	}
	parts := make([]string, len(u))
	for i, c := range u {
		parts[i] = "card" + strconv.Itoa(c.card) + "=" + strconv.FormatInt(c.units, 10)
	}
	return strings.Join(parts, " ") + " units"
}

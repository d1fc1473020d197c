package schedulerplugin

import (
	"math"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// draNode is one node's cards as the gpushare driver's ResourceSlices publish them, with
// the units the allocated claims hold on each.
type draNode struct {
	unit     int64         // bytes per unit: the memory capacity's request-policy step
	defUnits int64         // units a request without a memory request consumes (the policy's default)
	cards    []policy.Card // index order once finished; Total and Used in units
	full     bool          // while charging: a result names a device the slices do not list (finish fills every card)
}

// draView is the DRA back end's nodes as kube-scheduler's DRA allocator sees them in one
// scheduling cycle, by node name. Nodes without a gpushare ResourceSlice are absent.
type draView struct {
	nodes map[string]*draNode
}

// newDRAView reads the gpushare driver's ResourceSlices of the nodes want holds (nil: every
// node; each pool's newest generation) and charges every allocated claim's results of that
// driver to their cards; memo keeps the slices' devices as read (nil: read afresh).
//
// Slices, cards and consumed memory are read with pkg/gpushare's DRA reader, as inspect and
// the DRA plugin read them. It fails closed: a record it cannot read never frees memory. A
// device the reader refuses (gpushare.ReadDRACard), or a duplicate index, offers nothing;
// one whose request policy has another step than the node's counts as full; consumed memory
// that is not a positive whole number of units fills its card; a result naming a device its
// pool's slices do not list fills every card of the pool's node (the slices are being
// replaced). A result without consumed memory adds the whole card, as the DRA plugin
// prepares it. A card is unhealthy while a taint with effect NoSchedule or NoExecute is on
// it (gpushare.DRADeviceHealthy).
func newDRAView(objs []*resourceapi.ResourceSlice, claims []*resourceapi.ResourceClaim, want map[string]bool, memo *sliceMemo) *draView {
	v, pools := readDRAPools(objs, want, memo)
	for _, cl := range claims {
		if cl != nil && cl.Status.Allocation != nil {
			chargeAllocation(pools, cl.Status.Allocation)
		}
	}
	v.finish()
	memo.prune(objs)
	return v
}

// readDRAPools reads the cards of the gpushare pools of the nodes want holds (see
// newDRAView) into a view without claims, and returns the pools by name.
func readDRAPools(objs []*resourceapi.ResourceSlice, want map[string]bool, memo *sliceMemo) (*draView, map[string]*draPool) {
	v := &draView{nodes: map[string]*draNode{}}
	pools := map[string]*draPool{}
	for name, ss := range gpushare.DRANewestPools(objs, wantNode(want)) {
		pools[name] = readDRAPool(v.node(*ss[0].Spec.NodeName), ss, memo)
	}
	return v, pools
}

// readDRAPool adds the cards of one pool's slices ss to node n and returns the pool.
func readDRAPool(n *draNode, ss []*resourceapi.ResourceSlice, memo *sliceMemo) *draPool {
	p := &draPool{node: n}
	for _, s := range ss {
		recs := memo.devices(s)
		p.devices, p.cards = slices.Grow(p.devices, len(recs)), slices.Grow(p.cards, len(recs))
		for _, d := range recs {
			p.devices = append(p.devices, d.name)
			p.cards = append(p.cards, n.addCard(d))
		}
	}
	return p
}

// chargeAllocation charges a's results of the gpushare driver to the cards of pools (see
// newDRAView); results in other pools are not the view's.
func chargeAllocation(pools map[string]*draPool, a *resourceapi.AllocationResult) {
	for i := range a.Devices.Results {
		r := &a.Devices.Results[i]
		if p := pools[r.Pool]; p != nil && r.Driver == gpushare.DRADriverName {
			chargeResult(p, r)
		}
	}
}

// chargePool charges a's results of the gpushare driver in pool name, p, to its cards.
func chargePool(name string, p *draPool, a *resourceapi.AllocationResult) {
	for i := range a.Devices.Results {
		r := &a.Devices.Results[i]
		if r.Pool == name && r.Driver == gpushare.DRADriverName {
			chargeResult(p, r)
		}
	}
}

// chargeResult charges r to its card of p; a device p does not list fills every card of
// p's node (finish).
func chargeResult(p *draPool, r *resourceapi.DeviceRequestAllocationResult) {
	if i := slices.Index(p.devices, r.Device); i >= 0 {
		p.node.consume(p.cards[i], r)
	} else {
		p.node.full = true
	}
}

// finish finishes every node of the view (draNode.finish).
func (v *draView) finish() {
	for _, n := range v.nodes {
		n.finish()
	}
}

// finish fills every card of a node charged with a device its slices do not list, and puts
// its cards in index order; the pools' card positions no longer hold.
func (n *draNode) finish() {
	if n.full {
		for i := range n.cards {
			n.cards[i].Used = n.cards[i].Total
		}
		n.full = false
	}
	slices.SortFunc(n.cards, func(a, b policy.Card) int { return a.Index - b.Index })
}

// clone is a copy of n whose cards can be charged without touching n's.
func (n *draNode) clone() *draNode {
	c := *n
	c.cards = slices.Clone(n.cards)
	return &c
}

// draPool is one gpushare pool of the view: its node, its devices' names and the position
// of each device's card in the node's cards (-1: an odd device that offers nothing). A
// pool holds a node's few cards: a list is cheaper than a map.
type draPool struct {
	node    *draNode
	devices []string
	cards   []int
}

// node returns the view's node of that name, adding it.
func (v *draView) node(name string) *draNode {
	n := v.nodes[name]
	if n == nil {
		n = &draNode{}
		v.nodes[name] = n
	}
	return n
}

// wantNode is want as gpushare.DRANewestPools takes it: nil (every node) stays nil.
func wantNode(want map[string]bool) func(string) bool {
	if want == nil {
		return nil
	}
	return func(node string) bool { return want[node] }
}

// draDeviceRecord is what the view reads of one device of a slice.
type draDeviceRecord struct {
	name  string
	valid bool // gpushare.ReadDRACard read it
	card  gpushare.DRACard
}

// readDevice reads device d; an odd device (see gpushare.ReadDRACard) is not valid.
func readDevice(d *resourceapi.Device) draDeviceRecord {
	c, err := gpushare.ReadDRACard(d)
	return draDeviceRecord{name: d.Name, valid: err == nil, card: c}
}

// addCard adds device d as a card and returns its position, -1 when d offers nothing (see
// newDRAView). The node's unit is the first valid device's.
func (n *draNode) addCard(d draDeviceRecord) int {
	if !d.valid || slices.ContainsFunc(n.cards, func(c policy.Card) bool { return c.Index == d.card.Index }) {
		return -1
	}
	step := d.card.Unit.MiB * bytesPerMiB
	if n.unit == 0 {
		n.unit, n.defUnits = step, d.card.DefaultUnits
	}
	c := policy.Card{Index: d.card.Index, Total: d.card.Units, Healthy: d.card.Healthy}
	if step != n.unit {
		c.Total = d.card.MiB * bytesPerMiB / n.unit
		c.Used = c.Total
	}
	n.cards = append(n.cards, c)
	return len(n.cards) - 1
}

// consume charges allocation result r to card i (-1: an odd device, nothing to charge): what
// gpushare.DRAConsumedUnits reads, the whole card when the result records no consumed
// memory; memory it cannot read fills the card.
func (n *draNode) consume(i int, r *resourceapi.DeviceRequestAllocationResult) {
	if i < 0 {
		return
	}
	c := &n.cards[i]
	units, err := gpushare.DRAConsumedUnits(r, gpushare.Unit{MiB: n.unit / bytesPerMiB}, c.Total)
	if err != nil {
		c.Used = max(c.Used, c.Total)
		return
	}
	c.Used = min(c.Used+units, math.MaxInt64/2)
}

// bytesPerMiB converts a unit's MiB to the bytes DRA quantities count.
const bytesPerMiB = 1 << 20

// maxDRABytes bounds the quantities read: far above any card, far below overflow.
const maxDRABytes = int64(1) << 60

// quantityBytes is q in bytes, rounded up; ok is false for a negative quantity or one above
// maxDRABytes.
func quantityBytes(q *resource.Quantity) (int64, bool) {
	if q.Sign() < 0 || q.CmpInt64(maxDRABytes) > 0 {
		return 0, false
	}
	return q.Value(), true
}

// ceilDiv is a/b rounded up, for a >= 0 and b > 0.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

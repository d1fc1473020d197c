package schedulerplugin

import (
	"math"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// maxDRAIndex bounds the NVML index a card device may carry; a larger one is an odd record.
const maxDRAIndex = 1 << 16

// draNode is one node's cards as the gpushare driver's ResourceSlices publish them, with
// the units the allocated claims hold on each.
type draNode struct {
	unit     int64         // bytes per unit: the memory capacity's request-policy step
	defUnits int64         // units a request without a memory request consumes (the policy's default)
	cards    []policy.Card // index order; Total and Used in units
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
// It fails closed: a record it cannot read never frees memory. A device with an unreadable
// memory capacity or index, or a duplicate index, offers nothing; one whose request policy
// has another step than the node's counts as full; consumed memory that is not a readable
// quantity fills its card; a result naming a device its pool's slices do not list fills
// every card of the pool's node (the slices are being replaced). A result without consumed
// memory holds the whole card, as the DRA plugin prepares it.
func newDRAView(objs []*resourceapi.ResourceSlice, claims []*resourceapi.ResourceClaim, want map[string]bool, memo *sliceMemo) *draView {
	v := &draView{nodes: map[string]*draNode{}}
	pools := map[string]*draPool{}
	for name, ss := range newestPools(objs, want) {
		p := &draPool{node: v.node(*ss[0].Spec.NodeName)}
		pools[name] = p
		for _, s := range ss {
			recs := memo.devices(s)
			p.devices, p.cards = slices.Grow(p.devices, len(recs)), slices.Grow(p.cards, len(recs))
			for _, d := range recs {
				p.devices = append(p.devices, d.name)
				p.cards = append(p.cards, p.node.addCard(d))
			}
		}
	}
	var poison []*draNode // nodes whose every card counts as full
	for _, cl := range claims {
		if cl == nil || cl.Status.Allocation == nil {
			continue
		}
		for _, r := range cl.Status.Allocation.Devices.Results {
			p := pools[r.Pool]
			if p == nil || r.Driver != gpushare.DRADriverName {
				continue
			}
			if i := slices.Index(p.devices, r.Device); i >= 0 {
				p.node.consume(p.cards[i], r.ConsumedCapacity)
			} else {
				poison = append(poison, p.node)
			}
		}
	}
	for _, n := range poison {
		for i := range n.cards {
			n.cards[i].Used = n.cards[i].Total
		}
	}
	for _, n := range v.nodes {
		slices.SortFunc(n.cards, func(a, b policy.Card) int { return a.Index - b.Index })
	}
	memo.prune(objs)
	return v
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

// newestPools are the gpushare driver's slices of single nodes that want holds (nil: every
// node) by pool name, each pool's newest generation only (older ones are being replaced).
func newestPools(all []*resourceapi.ResourceSlice, want map[string]bool) map[string][]*resourceapi.ResourceSlice {
	pools := map[string][]*resourceapi.ResourceSlice{}
	for _, s := range all {
		if s == nil || s.Spec.Driver != gpushare.DRADriverName || s.Spec.NodeName == nil || *s.Spec.NodeName == "" {
			continue
		}
		if want != nil && !want[*s.Spec.NodeName] {
			continue
		}
		have := pools[s.Spec.Pool.Name]
		switch {
		case len(have) == 0 || s.Spec.Pool.Generation > have[0].Spec.Pool.Generation:
			pools[s.Spec.Pool.Name] = []*resourceapi.ResourceSlice{s}
		case s.Spec.Pool.Generation == have[0].Spec.Pool.Generation && *s.Spec.NodeName == *have[0].Spec.NodeName:
			pools[s.Spec.Pool.Name] = append(have, s)
		}
	}
	return pools
}

// draDeviceRecord is what the view reads of one device of a slice, in bytes.
type draDeviceRecord struct {
	name    string
	index   int
	valid   bool  // index and memory capacity readable
	total   int64 // the memory capacity
	step    int64 // the request policy's step; 0: none readable
	def     int64 // the request policy's default; 0: none readable
	healthy bool  // no taint that keeps new claims off
}

// readDevice reads device d.
func readDevice(d *resourceapi.Device) draDeviceRecord {
	r := draDeviceRecord{name: d.Name, healthy: !slices.ContainsFunc(d.Taints, schedulingTaint)}
	idx, okIndex := deviceIndex(d)
	capa, okCapa := d.Capacity[gpushare.DRACapacityMemory]
	total, okTotal := quantityBytes(&capa.Value)
	r.index, r.total, r.valid = idx, total, okIndex && okCapa && okTotal
	if r.valid {
		r.step, r.def = policyStep(capa.RequestPolicy)
	}
	return r
}

// addCard adds device d as a card and returns its position, -1 when d offers nothing (see
// newDRAView). The node's unit is the first readable step.
func (n *draNode) addCard(d draDeviceRecord) int {
	if !d.valid || slices.ContainsFunc(n.cards, func(c policy.Card) bool { return c.Index == d.index }) {
		return -1
	}
	if n.unit == 0 && d.step > 0 {
		n.unit, n.defUnits = d.step, 1
		if d.def > 0 {
			n.defUnits = ceilDiv(d.def, d.step)
		}
	}
	if n.unit == 0 {
		return -1
	}
	c := policy.Card{Index: d.index, Total: d.total / n.unit, Healthy: d.healthy}
	if d.step != n.unit {
		c.Used = c.Total
	}
	n.cards = append(n.cards, c)
	return len(n.cards) - 1
}

// consume charges one allocation result to card i (-1: an odd device, nothing to charge).
func (n *draNode) consume(i int, consumed map[resourceapi.QualifiedName]resource.Quantity) {
	if i < 0 {
		return
	}
	c := &n.cards[i]
	q, ok := consumed[gpushare.DRACapacityMemory]
	if !ok {
		c.Used = max(c.Used, c.Total)
		return
	}
	b, valid := quantityBytes(&q)
	if !valid {
		c.Used = max(c.Used, c.Total)
		return
	}
	// At least one unit, the request policy's minimum: a share of nothing is an odd record.
	c.Used = min(c.Used+max(ceilDiv(b, n.unit), 1), math.MaxInt64/2)
}

// schedulingTaint reports a taint that keeps new claims off the device (any effect but
// None, which only informs). A claim's toleration is not looked at: the card counts as
// taking nothing new.
func schedulingTaint(t resourceapi.DeviceTaint) bool {
	return t.Effect != resourceapi.DeviceTaintEffectNone
}

// deviceIndex is the card's NVML index attribute.
func deviceIndex(d *resourceapi.Device) (int, bool) {
	a, ok := d.Attributes[gpushare.DRAAttributeIndex]
	if !ok || a.IntValue == nil || *a.IntValue < 0 || *a.IntValue >= maxDRAIndex {
		return 0, false
	}
	return int(*a.IntValue), true
}

// policyStep is the request policy's step and default in bytes (0 where missing or
// unreadable).
func policyStep(p *resourceapi.CapacityRequestPolicy) (step, def int64) {
	if p == nil {
		return 0, 0
	}
	if p.ValidRange != nil && p.ValidRange.Step != nil {
		if b, ok := quantityBytes(p.ValidRange.Step); ok && b > 0 {
			step = b
		}
	}
	if p.Default != nil {
		if b, ok := quantityBytes(p.Default); ok {
			def = b
		}
	}
	return step, def
}

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

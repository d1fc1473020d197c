package cache

import (
	"math/bits"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// unitCode is a gpu-mem unit in the one byte a Pod has room for (Pod.unit): 0 for a record
// without gpushare.AnnotationUnit, log2(MiB)+1 for a unit that is a power of two MiB (MiB,
// GiB, 256MiB, 2GiB: every unit of the documented spellings), unitOther for any other.
type unitCode uint8

// unitOther stands for every unit that is not a power of two MiB. Two such units compare
// equal here: the cache cannot tell a node that moved from 100MiB to 300MiB under running
// pods. share-plugin can, with the exact units, and refuses to start on such a move
// (deviceplugin's unit change check), so no node publishes the new unit while those pods run.
const unitOther unitCode = 0xff

// codeOf is u's unitCode; the zero Unit is the protocol's default GiB.
func codeOf(u gpushare.Unit) unitCode {
	mib := u.MiB
	if mib <= 0 {
		mib = gpushare.GiB.MiB
	}
	if mib&(mib-1) != 0 {
		return unitOther
	}
	return unitCode(bits.TrailingZeros64(uint64(mib)) + 1)
}

// nodeUnit is the unit the node's records must count in: the published one, else GiB (the
// fallback inventory's). Caller holds n.mu.
func (n *nodeState) nodeUnit() gpushare.Unit {
	if n.unitMiB == 0 {
		return gpushare.GiB
	}
	return gpushare.Unit{MiB: int64(n.unitMiB)}
}

// publishedUnit is the unit to write with a record on the node: the published one, or the
// zero Unit (no unit annotation) when the node publishes none. Caller holds n.mu.
func (n *nodeState) publishedUnit() gpushare.Unit {
	return gpushare.Unit{MiB: int64(n.unitMiB)}
}

// otherUnit reports a pod whose record counts in another unit than the node's: its unit
// counts say nothing true about the node's cards. A record without a unit counts in the
// node's. Caller holds n.mu.
func (n *nodeState) otherUnit(p *Pod) bool {
	return p.unit != 0 && p.unit != codeOf(n.nodeUnit())
}

// unit is the Unit c stands for; ok is false for 0 and unitOther, which name no one unit.
func (c unitCode) unit() (u gpushare.Unit, ok bool) {
	if c == 0 || c == unitOther {
		return gpushare.Unit{}, false
	}
	return gpushare.Unit{MiB: 1 << (c - 1)}, true
}

// String names the unit, for messages.
func (c unitCode) String() string {
	if u, ok := c.unit(); ok {
		return u.String()
	}
	if c == unitOther {
		return "a unit that is not a power of two MiB"
	}
	return "the node's unit"
}

// inNodeUnits converts units of the pod's request to the node's unit. A record in another
// unit says the request's units are of that unit's size: converted, rounded up, or
// gpushare.MaxContainerUnits (a whole card, a whole node) when unitCode cannot name that
// unit. Caller holds n.mu.
func (n *nodeState) inNodeUnits(p *Pod, units int64) int64 {
	if !n.otherUnit(p) {
		return units
	}
	rec, ok := p.unit.unit()
	if !ok {
		return gpushare.MaxContainerUnits
	}
	// units ≤ 2^32 and rec.MiB ≤ 2^30: the product fits int64.
	units, node := min(units, gpushare.MaxContainerUnits), n.nodeUnit().MiB
	return (units*rec.MiB + node - 1) / node
}

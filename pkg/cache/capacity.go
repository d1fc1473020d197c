package cache

import (
	"math"
	"sync"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// capacityBook is the units of the known nodes' healthy cards, summed per unit size
// (Capacity): a node publishing MiB units next to GiB nodes would otherwise count its memory
// 1024 times over. A node adds at most gpushare.MaxNodeUnits, so no sum overflows. Its lock
// is taken after a node's (the node handlers set a node's share under it) and held briefly.
type capacityBook struct {
	mu     sync.Mutex
	byNode map[string]capacityShare
	byUnit map[int64]int64 // unit size (MiB) → units
}

// capacityShare is what one node adds to the book: units of one size.
type capacityShare struct {
	unitMiB int64
	units   int64
}

// shareOf is the share of a node with units healthy units of unit.
func shareOf(unit gpushare.Unit, units int64) capacityShare {
	mib := unit.MiB
	if mib <= 0 {
		mib = gpushare.GiB.MiB
	}
	return capacityShare{unitMiB: mib, units: units}
}

// set records what node adds now, in place of what it added before; the zero share removes
// it.
func (b *capacityBook) set(node string, s capacityShare) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.byNode == nil {
		b.byNode, b.byUnit = map[string]capacityShare{}, map[int64]int64{}
	}
	old := b.byNode[node]
	if old == s {
		return
	}
	b.add(old.unitMiB, -old.units)
	b.add(s.unitMiB, s.units)
	if s.units == 0 {
		delete(b.byNode, node)
	} else {
		b.byNode[node] = s
	}
}

// add adds units of a size to its sum. Caller holds mu.
func (b *capacityBook) add(unitMiB, units int64) {
	if units == 0 {
		return
	}
	if b.byUnit[unitMiB] += units; b.byUnit[unitMiB] == 0 {
		delete(b.byUnit, unitMiB)
	}
}

// units is the capacity in the unit holding most of its memory (ties: the smaller unit), the
// other units' memory converted to it, rounded down; exact when all nodes share one unit.
func (b *capacityBook) units() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	var (
		dom, domUnits    int64
		domMiB, totalMiB float64
	)
	for mib, u := range b.byUnit {
		m := float64(u) * float64(mib)
		totalMiB += m
		if dom == 0 || m > domMiB || (m == domMiB && mib < dom) {
			dom, domUnits, domMiB = mib, u, m
		}
	}
	if len(b.byUnit) <= 1 {
		return domUnits
	}
	return int64(math.Min(totalMiB/float64(dom), math.MaxInt64))
}

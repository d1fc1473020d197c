package gpushare

import "fmt"

// Bounds of what a node's inventory may publish. The inventory is written with the node's
// own credential, so the ledger takes no value beyond what a real node has: one huge card
// would overflow the sums of card units (per node, and fgd's cluster-wide capacity) and draw
// every placement.
const (
	// MaxCards is the most cards one node may list (annotation or allocatable gpu-count).
	MaxCards = 1024
	// MaxCardUnits is the most gpu-mem units one card may have.
	MaxCardUnits int64 = 1 << 32
	// MaxCardMiB is the most memory one card may have, in MiB: 4 TiB, over ten times the
	// largest card made. A unit larger than that (ParseUnit accepts up to 1 PiB) fits on no
	// card.
	MaxCardMiB int64 = 1 << 22
	// MaxNodeUnits is the most units one node can add to a sum (MaxCards × MaxCardUnits,
	// 2^42): sums over 2^21 such nodes still fit in an int64.
	MaxNodeUnits = MaxCards * MaxCardUnits
)

// RangeError: a node's inventory holds a value outside the bounds above (a negative or
// oversized card, a unit larger than any card, more cards than MaxCards). The node then
// offers no card at all, rather than its allocatable fallback: whoever publishes such a
// value is broken or hostile, and its other values are no better.
type RangeError struct {
	// What names the value, e.g. "card 0 units".
	What string
	// Value is the published value; Max the largest accepted (the smallest is 0).
	Value, Max int64
}

func (e *RangeError) Error() string {
	return fmt.Sprintf("%s %d out of range 0..%d", e.What, e.Value, e.Max)
}

// checkRange returns a *RangeError for the first value of inv outside the bounds: the card
// count, the unit (MiB), each card's units, its memory (units × unit, MiB) and its published
// memoryMiB, which must hold its units (a card cannot offer more than it has). inv.Unit must
// be set (ParseInventory defaults it).
func checkRange(inv Inventory) error {
	if n := len(inv.Devices); n > MaxCards {
		return &RangeError{What: "card count", Value: int64(n), Max: MaxCards}
	}
	if inv.Unit.MiB > MaxCardMiB {
		return &RangeError{What: "unit size (MiB)", Value: inv.Unit.MiB, Max: MaxCardMiB}
	}
	for _, d := range inv.Devices {
		if d.Units < 0 || d.Units > MaxCardUnits {
			return &RangeError{What: fmt.Sprintf("card %d units", d.Index), Value: d.Units, Max: MaxCardUnits}
		}
		// Units ≤ 2^32 and the unit ≤ 2^22 MiB: the product fits.
		mib := d.Units * inv.Unit.MiB
		if mib > MaxCardMiB {
			return &RangeError{What: fmt.Sprintf("card %d memory (MiB, units × %s)", d.Index, inv.Unit), Value: mib, Max: MaxCardMiB}
		}
		if d.MemoryMiB < 0 || d.MemoryMiB > MaxCardMiB {
			return &RangeError{What: fmt.Sprintf("card %d memoryMiB", d.Index), Value: d.MemoryMiB, Max: MaxCardMiB}
		}
		if d.MemoryMiB > 0 && mib > d.MemoryMiB {
			return &RangeError{What: fmt.Sprintf("card %d memory (MiB, units × %s) over its memoryMiB", d.Index, inv.Unit), Value: mib, Max: d.MemoryMiB}
		}
	}
	return nil
}

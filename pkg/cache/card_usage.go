package cache

import (
	"slices"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// cardUsage is what one pod holds: gpu-mem units per card index, as (card, units) pairs in
// ascending card order. A slice rather than a gpushare.CardUnits map because every placed
// pod keeps one: a one-card map costs about 200 bytes, this 16.
type cardUsage []cardUse

type cardUse struct {
	card  int
	units int64 // gpu-mem units
}

// usageOf converts a map of units per card; cards with zero units are kept (a pod may list
// them) and an empty map gives nil.
func usageOf(cu gpushare.CardUnits) cardUsage {
	if len(cu) == 0 {
		return nil
	}
	out := make(cardUsage, 0, len(cu))
	for card, units := range cu {
		out = append(out, cardUse{card: card, units: units})
	}
	slices.SortFunc(out, func(a, b cardUse) int { return a.card - b.card })
	return out
}

// on returns the units held on card (0 when none).
func (u cardUsage) on(card int) int64 {
	for _, c := range u {
		if c.card == card {
			return c.units
		}
	}
	return 0
}

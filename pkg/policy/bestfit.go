package policy

import "github.com/gpushare/gpushare/pkg/gpushare"

// bestfit puts a pod where the fewest free units remain afterwards, counted in absolute
// units over the node's healthy cards (the classic best-fit bin-packing rule; on mixed card
// sizes it favours small nodes, where binpack compares fullness ratios).
// Card choice: best fit. Score: 10 for a node left full, less the more free units remain
// relative to the node's capacity.
type bestfit struct{}

var _ usageRater = bestfit{}

func (bestfit) Name() string { return "bestfit" }

func (b bestfit) Place(node Node, req gpushare.PodRequest) (Placement, error) {
	return place(node, req, b.chooser())
}

func (bestfit) chooser() chooser { return chooseBestFit }

// score is the node's fullness after the placement, scaled to 0..10.
func (bestfit) score(node Node, p Placement) int64 {
	var buf [16]int64
	_, whole := fullness(node, usageOf(node, p, buf[:0]))
	return scale(whole)
}

// Rate is minus the free units left on the node after the placement.
func (bestfit) Rate(node Node, p Placement) float64 {
	var buf [16]int64
	return bestfit{}.rateUsage(node, usageOf(node, p, buf[:0]), nil)
}

func (bestfit) rateUsage(node Node, u usage, _ *scratch) float64 {
	var free int64
	for i, c := range node.Cards {
		if f := c.Free() - u.units[i]; f > 0 {
			free += f
		}
	}
	return -float64(free)
}

package policy

import "github.com/gpushare/gpushare/pkg/gpushare"

// bestfit puts a pod where the fewest free units remain afterwards, counted in absolute
// units over the node's healthy cards (the classic best-fit bin-packing rule; on mixed card
// sizes it favours small nodes, where binpack compares fullness ratios).
// Card choice: best fit.
type bestfit struct{}

var _ usageScorer = bestfit{}

func (bestfit) Name() string { return "bestfit" }

func (b bestfit) Place(node Node, req gpushare.PodRequest) (Placement, error) {
	return place(node, req, b.chooser())
}

func (bestfit) chooser() chooser { return chooseBestFit }

// Score is minus the free units left on the node after the placement.
func (bestfit) Score(node Node, p Placement) float64 {
	var buf [16]int64
	return bestfit{}.scoreUsage(node, usageOf(node, p, buf[:0]), nil)
}

func (bestfit) scoreUsage(node Node, u usage, _ *scratch) float64 {
	var free int64
	for i, c := range node.Cards {
		if f := c.Free() - u.units[i]; f > 0 {
			free += f
		}
	}
	return -float64(free)
}

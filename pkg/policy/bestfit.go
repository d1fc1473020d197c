package policy

import "github.com/gpushare/gpushare/pkg/gpushare"

// bestfit puts a pod where the fewest free units remain afterwards, counted in absolute
// units over the node's healthy cards (the classic best-fit bin-packing rule; on mixed card
// sizes it favours small nodes, where binpack compares fullness ratios).
// Card choice: best fit. Score: 10 for a node left full, less the more free units remain
// relative to the node's capacity.
type bestfit struct{}

var (
	_ Policy = bestfit{}
	_ Rater  = bestfit{}
)

func (bestfit) Name() string { return "bestfit" }

func (bestfit) Place(node Node, req gpushare.PodRequest) (Placement, error) {
	return placeWithFallback(node, req, byPreference(bestFit))
}

func (bestfit) Score(node Node, p Placement) int64 {
	_, whole := fullness(node, p)
	return scale(whole)
}

// Rate is minus the free units left on the node after the placement.
func (bestfit) Rate(node Node, p Placement) float64 {
	var free int64
	for _, c := range node.Cards {
		if f := c.Free() - p.Usage[c.Index]; f > 0 {
			free += f
		}
	}
	return -float64(free)
}

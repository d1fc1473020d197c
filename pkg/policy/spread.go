package policy

import "github.com/gpushare/gpushare/pkg/gpushare"

// spread places pods on the emptiest cards and nodes, trading packing for less contention.
// Card choice: the fitting card with the most free units, lowest index on ties.
type spread struct{}

var _ usageScorer = spread{}

func (spread) Name() string { return "spread" }

func (s spread) Place(node Node, req gpushare.PodRequest) (Placement, error) {
	return place(node, req, s.chooser())
}

func (spread) chooser() chooser { return chooseMostFree }

// Score is the mirror of binpack's: 3/4 the chosen cards' emptiness after placement and 1/4
// the node's, in [0,1].
func (spread) Score(node Node, p Placement) float64 {
	var buf [16]int64
	return spread{}.scoreUsage(node, usageOf(node, p, buf[:0]), nil)
}

func (spread) scoreUsage(node Node, u usage, _ *scratch) float64 {
	cards, whole := fullness(node, u)
	return 0.75*(1-cards) + 0.25*(1-whole)
}

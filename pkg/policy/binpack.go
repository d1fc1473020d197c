package policy

import "github.com/gpushare/gpushare/pkg/gpushare"

// binpack fills the fullest cards and nodes first, keeping whole cards free for large pods.
// Card choice: the fitting card with the least free units (best fit), lowest index on ties.
type binpack struct{}

var _ usageScorer = binpack{}

func (binpack) Name() string { return "binpack" }

func (b binpack) Place(node Node, req gpushare.PodRequest) (Placement, error) {
	return place(node, req, b.chooser())
}

func (binpack) chooser() chooser { return chooseBestFit }

// Score is 3/4 the fullness of the chosen cards after placement and 1/4 the node's, in
// [0,1].
func (binpack) Score(node Node, p Placement) float64 {
	var buf [16]int64
	return binpack{}.scoreUsage(node, usageOf(node, p, buf[:0]), nil)
}

func (binpack) scoreUsage(node Node, u usage, _ *scratch) float64 {
	cards, whole := fullness(node, u)
	return 0.75*cards + 0.25*whole
}

package policy

import "github.com/gpushare/gpushare/pkg/gpushare"

// binpack fills the fullest cards and nodes first, keeping whole cards free for large pods.
// Card choice: the fitting card with the least free units (best fit), lowest index on ties.
// Score: 3/4 the fullness of the chosen cards after placement, 1/4 the node's, scaled 0..10.
type binpack struct{}

var _ usageRater = binpack{}

func (binpack) Name() string { return "binpack" }

func (b binpack) Place(node Node, req gpushare.PodRequest) (Placement, error) {
	return place(node, req, b.chooser())
}

func (binpack) chooser() chooser { return chooseBestFit }

// score is Rate scaled to 0..10.
func (r binpack) score(node Node, p Placement) int64 { return scale(r.Rate(node, p)) }

func (binpack) Rate(node Node, p Placement) float64 {
	var buf [16]int64
	return binpack{}.rateUsage(node, usageOf(node, p, buf[:0]), nil)
}

func (binpack) rateUsage(node Node, u usage, _ *scratch) float64 {
	cards, whole := fullness(node, u)
	return 0.75*cards + 0.25*whole
}

package policy

import "github.com/gpushare/gpushare/pkg/gpushare"

// spread places pods on the emptiest cards and nodes, trading packing for less contention.
// Card choice: the fitting card with the most free units, lowest index on ties.
// Score: the mirror of binpack, 3/4 the chosen cards' emptiness after placement, 1/4 the
// node's, scaled 0..10.
type spread struct{}

var (
	_ Policy = spread{}
	_ Rater  = spread{}
)

func (spread) Name() string { return "spread" }

func (spread) Place(node Node, req gpushare.PodRequest) (Placement, error) {
	return placeWithFallback(node, req, byPreference(func(a, b Card, fa, fb, _ int64) bool {
		if fa != fb {
			return fa > fb
		}
		return a.Index < b.Index
	}))
}

func (spread) Score(node Node, p Placement) int64 {
	cards, whole := fullness(node, p)
	return scale(0.75*(1-cards) + 0.25*(1-whole))
}

// Rate is the unrounded Score.
func (spread) Rate(node Node, p Placement) float64 {
	cards, whole := fullness(node, p)
	return 0.75*(1-cards) + 0.25*(1-whole)
}

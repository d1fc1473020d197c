package policy

import "github.com/gpushare/gpushare/pkg/gpushare"

// spread places pods on the emptiest cards and nodes, trading packing for less contention.
// Card choice: the fitting card with the most free units, lowest index on ties.
// Score: the mirror of binpack, 3/4 the chosen cards' emptiness after placement, 1/4 the
// node's, scaled 0..10.
type spread struct{}

var _ usageRater = spread{}

func (spread) Name() string { return "spread" }

func (s spread) Place(node Node, req gpushare.PodRequest) (Placement, error) {
	return place(node, req, s.chooser())
}

func (spread) chooser() chooser { return chooseMostFree }

// score is Rate scaled to 0..10.
func (r spread) score(node Node, p Placement) int64 { return scale(r.Rate(node, p)) }

func (spread) Rate(node Node, p Placement) float64 {
	var buf [16]int64
	return spread{}.rateUsage(node, usageOf(node, p, buf[:0]), nil)
}

func (spread) rateUsage(node Node, u usage, _ *scratch) float64 {
	cards, whole := fullness(node, u)
	return 0.75*(1-cards) + 0.25*(1-whole)
}

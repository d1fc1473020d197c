package policy

import "math"

// Rater is implemented by policies that rate a placement on a continuous scale (higher is
// better). Extender priorities are integers 0..10, so per-node scores tie often and the
// scheduler then picks among the tied nodes at random; Scores instead ranks the fine-grained
// rates of all nodes of one prioritize call.
type Rater interface {
	Rate(node Node, p Placement) float64
}

// Scores returns one priority per node (0..MaxScore) for a prioritize call; placements[i]
// is the placement chosen on nodes[i]. For a Rater, the best-rated node(s) get MaxScore and
// the others are spread linearly over 0..MaxScore-1 by rate, so the scheduler's argmax is the
// policy's; otherwise each node gets pol.Score.
func Scores(pol Policy, nodes []Node, placements []Placement) []int64 {
	out := make([]int64, len(nodes))
	r, ok := pol.(Rater)
	if !ok {
		for i := range nodes {
			out[i] = pol.Score(nodes[i], placements[i])
		}
		return out
	}
	rates := make([]float64, len(nodes))
	lo, hi := math.Inf(1), math.Inf(-1)
	for i := range nodes {
		rates[i] = r.Rate(nodes[i], placements[i])
		lo = math.Min(lo, rates[i])
		hi = math.Max(hi, rates[i])
	}
	const eps = 1e-9
	for i, v := range rates {
		switch {
		case v >= hi-eps:
			out[i] = MaxScore
		default:
			out[i] = int64(float64(MaxScore-1) * (v - lo) / (hi - lo))
		}
	}
	return out
}

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
	for i := range nodes {
		rates[i] = r.Rate(nodes[i], placements[i])
	}
	spreadRates(rates, nil, out)
	return out
}

// Rank is Scores for the rates of a Scorer: rates[i] is Scorer.Rate on node i, fits[i] its
// ok. Nodes that do not fit score 0 and take no part in the ranking, so the result is what
// Scores gives over the fitting nodes' placements. For a policy that is not a Rater, the
// rates are its Scores and pass through.
func Rank(pol Policy, rates []float64, fits []bool) []int64 {
	out := make([]int64, len(rates))
	if _, ok := pol.(Rater); !ok {
		for i, v := range rates {
			if fits[i] {
				out[i] = int64(v)
			}
		}
		return out
	}
	spreadRates(rates, fits, out)
	return out
}

// spreadRates gives the best of the fitting rates MaxScore and spreads the others linearly
// over 0..MaxScore-1; out[i] of a node that does not fit is left alone. fits nil: all fit.
func spreadRates(rates []float64, fits []bool, out []int64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, v := range rates {
		if fits == nil || fits[i] {
			lo = math.Min(lo, v)
			hi = math.Max(hi, v)
		}
	}
	const eps = 1e-9
	for i, v := range rates {
		switch {
		case fits != nil && !fits[i]:
		case v >= hi-eps:
			out[i] = MaxScore
		default:
			out[i] = int64(float64(MaxScore-1) * (v - lo) / (hi - lo))
		}
	}
}

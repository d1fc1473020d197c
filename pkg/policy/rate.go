package policy

import "math"

// Rank turns the rates of one pod on the candidate nodes of a prioritize call into extender
// priorities 0..10: rates[i] is the rate on node i (Scorer.Rate) and fits[i] whether the pod
// fits there (nil: every node fits). The best-rated fitting node(s) get 10 and the others
// are spread linearly over 0..9 by rate, so the scheduler's argmax is the policy's even
// though integer priorities would otherwise tie often. Nodes that do not fit get 0 and take
// no part in the spread.
func Rank(rates []float64, fits []bool) []int64 {
	out := make([]int64, len(rates))
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
			out[i] = maxScore
		default:
			out[i] = int64(float64(maxScore-1) * (v - lo) / (hi - lo))
		}
	}
	return out
}

package policy

import "math"

// NormalizeScores turns the scores of one pod on the candidate nodes of a prioritize call
// into extender priorities 0..MaxScore: scores[i] is the score on node i (Scorer.Score) and
// fits[i] whether the pod fits there (nil: every node fits). The best-scored fitting node(s)
// get MaxScore and the others are spread linearly over 0..MaxScore-1 by score, so the
// scheduler's argmax is the policy's even though integer priorities would otherwise tie
// often. Nodes that do not fit get 0 and take no part in the spread.
func NormalizeScores(scores []float64, fits []bool) []int64 {
	out := make([]int64, len(scores))
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, v := range scores {
		if fits == nil || fits[i] {
			lo = math.Min(lo, v)
			hi = math.Max(hi, v)
		}
	}
	const eps = 1e-9
	for i, v := range scores {
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

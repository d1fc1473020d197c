package replay

import (
	"fmt"

	"github.com/gpushare/gpushare/pkg/policy"
)

// standaloneScorer gives a node's 0..policy.MaxScore priority for a placement judged alone,
// without comparing it with the other candidates (policy.NormalizeScores does that): a
// coarser integer, which TiesRandomScore replays to show what normalizing across nodes
// gains. It is not part of the policies: each one's integer is built here from its
// exported Score.
type standaloneScorer struct {
	binpack policy.Policy // fgd's integer is binpack's
}

func newStandaloneScorer() (standaloneScorer, error) {
	bp, err := policy.New("binpack")
	if err != nil {
		return standaloneScorer{}, fmt.Errorf("standalone scores: %w", err)
	}
	return standaloneScorer{binpack: bp}, nil
}

// score is pol's integer for p on node: binpack, spread and policies this replay does not
// know, their score (a share in [0,1]) on the 0..MaxScore scale; bestfit, the node's used
// share after the placement; fgd, binpack's.
func (s standaloneScorer) score(pol policy.Policy, node policy.Node, p policy.Placement) int64 {
	switch pol.Name() {
	case "bestfit":
		return onPriorityScale(usedShare(node, pol.Score(node, p)))
	case "fgd":
		return onPriorityScale(s.binpack.Score(node, p))
	}
	return onPriorityScale(pol.Score(node, p))
}

// usedShare is the used share of node's healthy cards after a placement that bestfit
// scores leftFree: bestfit's score is minus the units left free on those cards, a whole
// number, so the share is exact. 0 for a node without capacity.
func usedShare(node policy.Node, leftFree float64) float64 {
	var capacity int64
	for _, c := range node.Cards {
		if c.Healthy && c.Total > 0 {
			capacity += c.Total
		}
	}
	if capacity == 0 {
		return 0
	}
	return float64(capacity-int64(-leftFree)) / float64(capacity)
}

// onPriorityScale maps a share in [0,1] to 0..policy.MaxScore, rounding to nearest and
// clamping.
func onPriorityScale(v float64) int64 {
	s := int64(v*float64(policy.MaxScore) + 0.5)
	return min(max(s, 0), policy.MaxScore)
}

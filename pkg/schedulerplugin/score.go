package schedulerplugin

import (
	"context"
	"math"
	"sync"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/policy"
)

// Score's raw value: the policy's rate in units of rateScale (rates are shares, a few units
// at most), or unfit where the pod does not fit (a node's cards changed since Filter).
// NormalizeScore ranks them.
const (
	rateScale = 1e9
	unfit     = math.MinInt64
)

// PreScore prepares the rating of the pod's placement on each node. A pod without gpu-mem
// is rated only under a workload-aware policy (fgd); otherwise Score is skipped for it.
func (p *Plugin) PreScore(_ context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	s, err := readState(state)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if s.req.IsZero() && !p.workloadAware {
		return fwk.NewStatus(fwk.Skip)
	}
	pol, req, host := s.pol, s.req, cache.HostRequest(pod)
	// A Scorer keeps buffers and is not safe for concurrent use; Score runs in parallel.
	s.scorers = &sync.Pool{New: func() any { return policy.NewScorer(pol, req, host) }}
	return nil
}

// Score rates the placement the policy would choose on the node (policy.Scorer.Rate, as the
// extender's prioritize does); NormalizeScore turns the rates into 0-100.
func (p *Plugin) Score(_ context.Context, state fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	s, err := readState(state)
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	if s.scorers == nil {
		return 0, nil
	}
	sc := s.scorers.Get().(*policy.Scorer)
	defer s.scorers.Put(sc)
	var (
		rate float64
		fits bool
	)
	p.cache.ViewEach([]string{nodeInfo.Node().Name}, func(_ int, node policy.Node) {
		rate, fits = sc.Rate(node)
	})
	if !fits {
		return unfit, nil
	}
	return int64(math.Round(rate * rateScale)), nil
}

// ScoreExtensions implements fwk.ScorePlugin: NormalizeScore.
func (p *Plugin) ScoreExtensions() fwk.ScoreExtensions { return p }

// NormalizeScore ranks the nodes' rates as the extender's prioritize does (policy.Rank: the
// policy's best node gets the top score, the others spread below by rate, unfit nodes 0),
// scaled to 0-100.
func (p *Plugin) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	rates, fits := make([]float64, len(scores)), make([]bool, len(scores))
	for i, s := range scores {
		if s.Score != unfit {
			rates[i], fits[i] = float64(s.Score)/rateScale, true
		}
	}
	for i, r := range policy.Rank(rates, fits) {
		scores[i].Score = r * (fwk.MaxNodeScore / policy.MaxScore)
	}
	return nil
}

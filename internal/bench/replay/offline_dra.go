package replay

import (
	"fmt"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// The DRA emulations of replayOffline (offlineConfig.DRA): every GPU pod asks its cards in
// ResourceClaims, and kube-scheduler's DRA allocator picks the devices, the first ones with
// room in the ResourceSlice's order (policy.FirstFit), whatever ranked the node.
const (
	// DRAAlone is kube-scheduler with its default plugins: DRA devices are invisible to
	// its scorers, so nodes rank by cpu and memory alone (kubeDefaultScore), the best node
	// taken with ties at random (lowest index with TiesFirst). CPU-only pods rank the same
	// way; offlineConfig.Policy and CPUPods are not used.
	DRAAlone = "alone"
	// DRAGPUShare is gpushare-scheduler's GPUShare plugin scoring the DRA pods: a node is
	// rated by the policy's Score of the placement the allocator will make there
	// (policy.FirstFit), then chosen as offlineConfig.Ties and CPUPods say, as on the
	// device-plugin path.
	DRAGPUShare = "gpushare"
)

// checkDRA validates cfg.DRA: a known mode, a policy unless DRAAlone, and no
// TiesRandomScore (a DRA emulation ranks by its own integers or normalized scores).
func (cfg offlineConfig) checkDRA() error {
	if cfg.DRA != "" && cfg.Ties == TiesRandomScore {
		return fmt.Errorf("offline DRA %q with ties %q: want %q or %q", cfg.DRA, cfg.Ties, TiesFirst, TiesRandom)
	}
	switch cfg.DRA {
	case "", DRAGPUShare:
		if cfg.Policy == nil {
			return fmt.Errorf("offline replay: no policy")
		}
	case DRAAlone:
	default:
		return fmt.Errorf("offline DRA %q: want %q or %q", cfg.DRA, DRAAlone, DRAGPUShare)
	}
	return nil
}

// placeDRA is place for the DRA emulations: the candidates pass the same filters, the
// node is ranked as cfg.DRA says, and the cards are policy.FirstFit's on the chosen node.
// DRAGPUShare rates the candidates with one policy.NewFirstFitScorer, as place does with
// policy.NewScorer: the same fit and, bit for bit, the same score as FirstFit then
// Policy.Score, with the Scorer's buffers and fgd's memo of equal nodes, which lives for
// this one pod.
func (o *offline) placeDRA(p policy.Policy, pod PodSpec, req gpushare.PodRequest) string {
	perCard := o.cfg.Units.PodUnitsPerCard(pod)
	var sc *policy.Scorer
	if o.cfg.DRA == DRAGPUShare {
		sc = policy.NewFirstFitScorer(p, req, policy.Host{CPUMilli: pod.MilliCPU, MemoryMiB: pod.MemoryMiB})
	}
	o.idx, o.scores, o.priorities = o.idx[:0], o.scores[:0], o.priorities[:0]
	for i, n := range o.state {
		// admits' card check is FirstFit's fit for the replay's one-container pods: count
		// cards with perCard free each.
		if !n.admits(pod, perCard) {
			continue
		}
		o.idx = append(o.idx, i)
		if o.cfg.DRA == DRAAlone {
			o.priorities = append(o.priorities, kubeDefaultScore(n.load, pod.MilliCPU, pod.MemoryMiB))
			continue
		}
		score, ok := sc.Score(n.policy)
		if !ok {
			panic(fmt.Sprintf("offline replay: FirstFit fails on node %s where the cards fit", n.spec.Name)) // a pre-check bug
		}
		o.scores = append(o.scores, score)
	}
	if len(o.idx) == 0 {
		return ""
	}
	var best int
	switch {
	case o.cfg.DRA == DRAGPUShare:
		best = o.choose(pod, o.scores, nil)
	case o.cfg.Ties == TiesFirst:
		for i, s := range o.priorities {
			if s > o.priorities[best] {
				best = i
			}
		}
	default:
		best = o.top(o.priorities)
	}
	n := o.state[o.idx[best]]
	pl, err := policy.FirstFit(n.policy, req)
	if err != nil {
		panic(fmt.Sprintf("offline replay: FirstFit fails where the cards fit: %v", err))
	}
	return o.apply(n, pod, pl)
}

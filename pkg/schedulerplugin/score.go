package schedulerplugin

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/policy"
)

// scoreChunk is how many nodes one parallel piece of PreScore rates with one Scorer.
const scoreChunk = 256

// nodeRates are the rates of one pod on a list of nodes: rates[i], fits[i] for names[i]
// (whose object is objs[i], when PreScore rated them). PreScore takes them from the
// plugin's pool and NormalizeScore puts them back: at 5000 nodes they are 160 KiB a pod.
type nodeRates struct {
	objs  []*v1.Node
	names []string
	rates []float64
	fits  []bool
	idx   []int // fitting's buffer
}

// resize makes r hold n nodes, reusing its arrays.
func (r *nodeRates) resize(n int) {
	if cap(r.rates) < n {
		*r = nodeRates{objs: make([]*v1.Node, n), names: make([]string, n), rates: make([]float64, n), fits: make([]bool, n), idx: make([]int, 0, n)}
		return
	}
	r.objs, r.names, r.rates, r.fits = r.objs[:n], r.names[:n], r.rates[:n], r.fits[:n]
}

// release clears r's references to node objects and returns it to pool.
func (r *nodeRates) release(pool *sync.Pool) {
	clear(r.objs)
	clear(r.names)
	pool.Put(r)
}

// PreScore rates the placement the policy would choose on each node (policy.Scorer.Score,
// as the extender's prioritize does), in parallel pieces of the node list, each under one
// read of the ledger: a framework call per node would cost more than the rating itself.
// Each piece also collects its nodes' objects from the framework's NodeInfos, so that work
// is parallel too; names come from the ledger, not from the objects (cache.ViewNodes). Score then has nothing left to do, and NormalizeScore ranks
// the rates. A pod without gpu-mem whose gpushare claims ask memory is rated on the DRA
// back end's cards, with the placement kube-scheduler's allocator will make (draRater);
// any other pod without gpu-mem is rated only under a workload-aware policy (fgd), and
// otherwise scoring is skipped.
func (p *Plugin) PreScore(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	s, err := readState(state)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if s.req.IsZero() {
		if s.dra == nil { // PreFilter reads it where it narrows the nodes (narrowDRA)
			if s.dra, err = p.readDRAScoring(pod, nodes); err != nil {
				return fwk.AsStatus(fmt.Errorf("%s: reading the pod's claims: %w", Name, err))
			}
		}
		if s.dra == nil && !p.workloadAware {
			return fwk.NewStatus(fwk.Skip)
		}
		p.learnClaimShape(s, pod, nodes)
		if s.dra == nil {
			if s.draCards, err = p.readDRACards(nodes); err != nil {
				return fwk.AsStatus(fmt.Errorf("%s: reading the DRA back end's cards: %w", Name, err))
			}
		}
	}
	s.scores = p.rate(ctx, s, pod, nodes)
	return nil
}

// learnClaimShape tells a workload-aware policy's ledger the shape of the pod's gpushare
// claims (cache.ObserveClaimShape), and re-reads the pod's policy when that changed it.
func (p *Plugin) learnClaimShape(s *cycleState, pod *v1.Pod, nodes []fwk.NodeInfo) {
	if s.dra != nil && p.workloadAware && p.cache.ObserveClaimShape(pod.UID, s.dra.shape(nodes), cache.HostRequest(pod)) {
		s.pol = p.cache.ForPod(policy.ForChoice(p.pol, s.req.Choice))
	}
}

// rate rates the pod on nodes in parallel pieces (see PreScore), into rates from the pool.
func (p *Plugin) rate(ctx context.Context, s *cycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *nodeRates {
	r, _ := p.rates.Get().(*nodeRates)
	if r == nil {
		r = &nodeRates{}
	}
	r.resize(len(nodes))
	host := cache.HostRequest(pod)
	pieces := (len(nodes) + scoreChunk - 1) / scoreChunk
	rate := func(piece int) {
		lo := piece * scoreChunk
		hi := min(lo+scoreChunk, len(nodes))
		for i := lo; i < hi; i++ {
			r.objs[i] = nodes[i].Node()
		}
		// A Scorer keeps buffers and is not safe for concurrent use: one per piece.
		score, release := s.scorer(host, &p.scorers)
		defer release()
		p.cache.ViewNodes(r.objs[lo:hi], s.req, func(i int, node policy.Node) {
			r.names[lo+i] = node.Name
			r.rates[lo+i], r.fits[lo+i] = score(node)
		})
	}
	if p.parallelizer != nil && pieces > 1 {
		p.parallelizer.Until(ctx, pieces, rate, Name+"PreScore")
	} else {
		for piece := range pieces {
			rate(piece)
		}
	}
	return r
}

// Score implements fwk.ScorePlugin. PreScore has rated every node; NormalizeScore turns the
// rates into 0-100.
func (p *Plugin) Score(context.Context, fwk.CycleState, *v1.Pod, fwk.NodeInfo) (int64, *fwk.Status) {
	return 0, nil
}

// ScoreExtensions implements fwk.ScorePlugin: NormalizeScore.
func (p *Plugin) ScoreExtensions() fwk.ScoreExtensions { return p }

// NormalizeScore ranks the nodes' rates as the extender's prioritize does
// (policy.NormalizeScores: the policy's best node gets the top score, the others spread below by rate, unfit nodes 0),
// scaled to 0-100. The framework lists the nodes in the order PreScore was given them; a
// list in another order is rated afresh.
func (p *Plugin) NormalizeScore(_ context.Context, state fwk.CycleState, pod *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	s, err := readState(state)
	if err != nil {
		return fwk.AsStatus(err)
	}
	r := s.scores
	if r == nil || !r.sameNodes(scores) {
		r = p.rateNames(s, pod, scores)
	}
	for i, v := range policy.NormalizeScores(r.rates, r.fits) {
		scores[i].Score = v * (fwk.MaxNodeScore / policy.MaxScore)
	}
	if r == s.scores {
		// The cycle needs the rates no more: a retry of NormalizeScore rates afresh.
		s.scores = nil
		r.release(&p.rates)
	}
	return nil
}

// sameNodes reports whether scores lists r's nodes in r's order.
func (r *nodeRates) sameNodes(scores fwk.NodeScoreList) bool {
	if len(scores) != len(r.names) {
		return false
	}
	for i := range scores {
		if scores[i].Name != r.names[i] {
			return false
		}
	}
	return true
}

// rateNames rates the pod on the nodes scores lists, in one pass.
func (p *Plugin) rateNames(s *cycleState, pod *v1.Pod, scores fwk.NodeScoreList) *nodeRates {
	r := &nodeRates{names: make([]string, len(scores)), rates: make([]float64, len(scores)), fits: make([]bool, len(scores))}
	for i := range scores {
		r.names[i] = scores[i].Name
	}
	score, release := s.scorer(cache.HostRequest(pod), &p.scorers)
	defer release()
	p.cache.ViewEachFor(r.names, s.req, func(i int, node policy.Node) { r.rates[i], r.fits[i] = score(node) })
	return r
}

// scorer rates the pod on one node at a time, for one goroutine: its gpushare claims
// (draRater) when it has some that ask memory, else its gpu-mem request (policy.Scorer);
// host is the pod's CPU and memory request. The Scorers come from pool; release hands them
// back once the goroutine is done scoring.
func (s *cycleState) scorer(host policy.Host, pool *policy.ScorerPool) (score func(policy.Node) (float64, bool), release func()) {
	if s.dra != nil {
		r := s.dra.rater(s.pol, host, pool)
		return r.score, r.release
	}
	sc := pool.Get(s.pol, s.req, host)
	release = func() { pool.Put(sc) }
	if s.draCards != nil {
		return s.draCards.withCards(sc.Score), release
	}
	return sc.Score, release
}

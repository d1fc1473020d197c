package policy

import "github.com/gpushare/gpushare/pkg/gpushare"

// usageScorer is what the registered policies implement besides Policy, so that a Scorer
// can place and score without building a Placement: the card order their Place uses, and
// their Score over a usage (Score(node, p) is scoreUsage of p's usage). s provides buffers.
type usageScorer interface {
	Policy
	chooser() chooser
	scoreUsage(node Node, u usage, s *scratch) float64
}

// Scorer scores one pod's placement on node after node, as one prioritize call does. Score
// gives the same fit answer as the policy's Place and, bit for bit, the same value as its
// Score of that placement, but for the registered policies it builds no Placement: once its
// buffers have grown to the largest node, it allocates nothing. Not safe for concurrent
// use; make one per call, or take one from a ScorerPool.
type Scorer struct {
	pol    Policy
	fast   usageScorer // nil for a policy defined elsewhere: Score then calls Place
	choose chooser     // fast's card order, built once
	req    gpushare.PodRequest
	host   Host // the pod's CPU and memory request
	s      scratch
	// memo is on for fgd with a workload, whose scoring costs far more than finding a node
	// equal to one scored before (scoreMemo); the cheap policies score every node afresh.
	memo *scoreMemo
	// spare is a memo's storage kept while the policy needs none, for a later init.
	spare *scoreMemo
	// firstFit: the cards are FirstFit's (NewFirstFitScorer), not the policy's Place.
	firstFit bool
}

// NewScorer returns a Scorer of req placed by pol; host is the pod's CPU and memory request
// (what Placement.Host carries).
func NewScorer(pol Policy, req gpushare.PodRequest, host Host) *Scorer {
	sc := newScorer(pol, req, host)
	if sc.fast != nil {
		sc.choose = sc.fast.chooser()
	}
	return sc
}

// NewFirstFitScorer returns a Scorer that rates FirstFit's placement of req with pol's
// Score, as kube-scheduler's DRA path needs (the allocator picks the cards, the policy only
// ranks nodes): Score gives the same fit answer as FirstFit and, bit for bit, the same value
// as pol.Score of FirstFit's placement with host, except that a pod without gpu-mem fits a
// node without cards (as with NewScorer; FirstFit refuses it). Same buffers and memo as
// NewScorer.
func NewFirstFitScorer(pol Policy, req gpushare.PodRequest, host Host) *Scorer {
	sc := newScorer(pol, req, host)
	sc.choose, sc.firstFit = chooseFirstFit, true
	return sc
}

// newScorer is a Scorer of pol's Place, without its card order.
func newScorer(pol Policy, req gpushare.PodRequest, host Host) *Scorer {
	sc := &Scorer{}
	sc.init(pol, req, host)
	return sc
}

// init makes sc a Scorer of pol's Place for req, without its card order, keeping the
// buffers and memo storage it has (ScorerPool): nothing it remembered of another pod or
// policy is used again.
func (sc *Scorer) init(pol Policy, req gpushare.PodRequest, host Host) {
	memo := sc.memo
	if memo == nil {
		memo = sc.spare
	}
	if memo != nil {
		memo.reset()
	}
	*sc = Scorer{pol: pol, req: req, host: host, s: sc.s}
	sc.s.forget()
	if f, ok := pol.(usageScorer); ok {
		sc.fast = f
	}
	if f, ok := pol.(fgd); ok && len(f.w) > 0 {
		if memo == nil {
			memo = &scoreMemo{}
		}
		sc.memo = memo
	} else {
		sc.spare = memo
	}
}

// Score places the pod on node and scores the placement; ok is false where it does not
// fit. A pod without gpu-mem fits every node, with cards or without (the scheduler judges
// its CPU and memory), and takes nothing on them. node is only read, and not kept.
func (sc *Scorer) Score(node Node) (score float64, ok bool) {
	if sc.fast == nil {
		return sc.scoreByPlace(node)
	}
	if sc.memo == nil || len(node.Cards) > maxMemoCards {
		return sc.score(node)
	}
	score, ok, found, h := sc.memo.lookup(node)
	if !found {
		score, ok = sc.score(node)
		sc.memo.store(h, node, score, ok)
	}
	return score, ok
}

// score is Score without the memo.
func (sc *Scorer) score(node Node) (float64, bool) {
	s := &sc.s
	switch {
	case sc.req.IsZero():
		s.held = resize(s.held, len(node.Cards))
		clear(s.held)
	case len(node.Cards) == 0 || !s.fillWithFallback(node, sc.req, sc.choose):
		return 0, false
	}
	u := usage{units: s.held, holds: holdsAny(s.held), host: sc.host}
	return sc.fast.scoreUsage(node, u, s), true
}

// scoreByPlace is Score through the public API, for policies without scoreUsage.
func (sc *Scorer) scoreByPlace(node Node) (float64, bool) {
	p := Placement{Usage: gpushare.CardUnits{}}
	if !sc.req.IsZero() {
		place := sc.pol.Place
		if sc.firstFit {
			place = FirstFit
		}
		var err error
		if p, err = place(node, sc.req); err != nil {
			return 0, false
		}
	}
	p.Host = sc.host
	return sc.pol.Score(node, p), true
}

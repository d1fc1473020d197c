package policy

import (
	"sync"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// ScorerPool hands out Scorers that reuse the buffers and memo storage of Scorers put back
// before, so that a scheduler rating thousands of nodes per pod does not allocate a memo
// per pod and piece of the node list. A Scorer from the pool scores exactly as a new one
// (NewScorer, NewFirstFitScorer): nothing it remembered of earlier pods is used. Safe for
// concurrent use; the zero value is ready. A Scorer must not be used after Put.
type ScorerPool struct {
	pool sync.Pool
}

// Get is NewScorer through the pool.
func (p *ScorerPool) Get(pol Policy, req gpushare.PodRequest, host Host) *Scorer {
	sc := p.take(pol, req, host)
	if sc.fast != nil {
		sc.choose = sc.fast.chooser()
	}
	return sc
}

// GetFirstFit is NewFirstFitScorer through the pool.
func (p *ScorerPool) GetFirstFit(pol Policy, req gpushare.PodRequest, host Host) *Scorer {
	sc := p.take(pol, req, host)
	sc.choose, sc.firstFit = chooseFirstFit, true
	return sc
}

// Put hands sc back for a later Get; nil is ignored.
func (p *ScorerPool) Put(sc *Scorer) {
	if sc == nil {
		return
	}
	// Drop the pod's request and the policy (its workload) until the next init.
	sc.init(nil, gpushare.PodRequest{}, Host{})
	p.pool.Put(sc)
}

func (p *ScorerPool) take(pol Policy, req gpushare.PodRequest, host Host) *Scorer {
	sc, _ := p.pool.Get().(*Scorer)
	if sc == nil {
		sc = &Scorer{}
	}
	sc.init(pol, req, host)
	return sc
}

package policy

import "github.com/gpushare/gpushare/pkg/gpushare"

// fillWithFallback runs fill with the policy's chooser and, if that greedy pass fails for a
// pod of several containers, once more in best-fit order, so a policy never rejects what Fit
// accepts (for one container the order cannot change the answer).
func (s *scratch) fillWithFallback(node Node, req gpushare.PodRequest, choose chooser) bool {
	return s.fill(node, req, choose) || (len(req.Containers) > 1 && s.fill(node, req, chooseBestFit))
}

// fill is the fit algorithm shared by all policies. It places req on node's cards into s:
// afterwards s.held is what the pod holds per card position and s.chosen the positions
// each container took, in s.order. False: container req.Containers[s.failed] found too few
// cards, and s.free is as it was then (what the reason reports).
//
//  1. App and sidecar containers (they run together) are placed largest per-card need first;
//     each takes `Cards` distinct cards with at least PerCard free, picked by `choose`.
//  2. Each regular init container runs alone beside the sidecars, so it may reuse what the pod
//     already holds on a card; it takes the cards that need the least extra, then best fit.
//
// Greedy: for single-container pods (nearly all) it is exact; for several containers with
// mixed sizes it may miss a packing that exists, never over-commits a card. req must be
// non-zero; node may have no cards (nothing then fits).
func (s *scratch) fill(node Node, req gpushare.PodRequest, choose chooser) bool {
	n := len(node.Cards)
	s.free, s.held, s.sidecars = resize(s.free, n), resize(s.held, n), resize(s.sidecars, n)
	for i, c := range node.Cards {
		s.free[i], s.held[i], s.sidecars[i] = c.Free(), 0, 0
	}
	s.sortContainers(req)
	s.chosen = s.chosen[:0]
	for _, ci := range s.order {
		c := req.Containers[ci]
		var ok bool
		if c.Kind == gpushare.Init {
			ok = s.takeInit(node, c)
		} else {
			ok = s.takeRunning(node, c, choose)
		}
		if !ok {
			s.failed = ci
			return false
		}
	}
	return true
}

// sortContainers fills s.order: app and sidecar containers by per-card need, then card
// count, both descending (ties keep spec order), then the init containers in spec order.
func (s *scratch) sortContainers(req gpushare.PodRequest) {
	s.order = s.order[:0]
	for i, c := range req.Containers {
		if c.Kind != gpushare.Init {
			s.order = append(s.order, i)
		}
	}
	insertionSort(s.order, func(a, b int) bool {
		ca, cb := req.Containers[a], req.Containers[b]
		if ca.PerCard() != cb.PerCard() {
			return ca.PerCard() > cb.PerCard()
		}
		return ca.Cards > cb.Cards
	})
	for i, c := range req.Containers {
		if c.Kind == gpushare.Init {
			s.order = append(s.order, i)
		}
	}
}

// takeRunning places an app or sidecar container: `Cards` distinct cards with PerCard free,
// picked by choose.
func (s *scratch) takeRunning(node Node, c gpushare.ContainerRequest, choose chooser) bool {
	need := c.PerCard()
	s.cand = s.cand[:0]
	for i := range node.Cards {
		if s.free[i] >= need {
			s.cand = append(s.cand, i)
		}
	}
	if len(s.cand) < c.Cards {
		return false
	}
	for _, i := range choose(node, s.free, s.cand, need, c.Cards, s) {
		s.free[i] -= need
		s.held[i] += need
		if c.Kind == gpushare.Sidecar {
			s.sidecars[i] += need
		}
		s.chosen = append(s.chosen, i)
	}
	return true
}

// takeInit places a regular init container. It runs alone beside the sidecars, so on each
// card it needs only what exceeds the pod's holding there less the sidecars' share; it takes
// the healthy cards needing the least extra, best fit on ties.
func (s *scratch) takeInit(node Node, c gpushare.ContainerRequest) bool {
	need := c.PerCard()
	extra := func(i int) int64 {
		if e := need + s.sidecars[i] - s.held[i]; e > 0 {
			return e
		}
		return 0
	}
	s.cand = s.cand[:0]
	for i := range node.Cards {
		if node.Cards[i].Healthy && extra(i) <= s.free[i] {
			s.cand = append(s.cand, i)
		}
	}
	if len(s.cand) < c.Cards {
		return false
	}
	chosen := selectFirst(s.cand, c.Cards, func(a, b int) bool {
		if ea, eb := extra(a), extra(b); ea != eb {
			return ea < eb
		}
		return bestFit(node.Cards[a], node.Cards[b], s.free[a], s.free[b])
	})
	for _, i := range chosen {
		e := extra(i)
		s.free[i] -= e
		s.held[i] += e
		s.chosen = append(s.chosen, i)
	}
	return true
}

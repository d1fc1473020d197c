package policy

import "github.com/gpushare/gpushare/pkg/gpushare"

// fit reports whether req can be placed on node, with the same answer every policy's Place
// gives (each falls back to the best-fit order when its own order fails): nil, or a
// *FitError naming the per-card shortfall.
func fit(node Node, req gpushare.PodRequest) error {
	_, err := place(node, req, chooseBestFit)
	return err
}

// place is every policy's Place: it runs the fit algorithm with the policy's chooser
// (scratch.fillWithFallback) and writes the result the way bind and the pod annotations want
// it: each container's cards by NVML index, and the pod's usage per card index.
func place(node Node, req gpushare.PodRequest, choose chooser) (Placement, error) {
	if len(node.Cards) == 0 {
		return Placement{}, &FitError{msg: "node has no GPU cards"}
	}
	if req.IsZero() {
		return Placement{Usage: gpushare.CardUnits{}}, nil
	}
	if err := singleShortfall(node, req); err != nil {
		return Placement{}, err
	}
	var s scratch
	if !s.fillWithFallback(node, req, choose) {
		return Placement{}, shortfall(node, s.free, req.Containers[s.failed], len(req.Containers) > 1)
	}
	var alloc gpushare.PodAllocation
	chosen := s.chosen
	for _, ci := range s.order {
		c := req.Containers[ci]
		cu := make(gpushare.CardUnits, c.Cards)
		for _, i := range chosen[:c.Cards] {
			cu[node.Cards[i].Index] = c.PerCard()
		}
		chosen = chosen[c.Cards:]
		alloc.Set(c.Ref, cu)
	}
	usage := make(gpushare.CardUnits)
	for i, h := range s.held {
		if h > 0 {
			usage[node.Cards[i].Index] = h
		}
	}
	return Placement{Allocation: alloc, Usage: usage}, nil
}

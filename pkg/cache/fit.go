package cache

import (
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// Fits reports whether req fits on the named node right now, evaluated under that node's
// lock without copying (the filter hot path: thousands of nodes per call). It returns nil,
// ErrUnknownNode, *InventoryError (the node's inventory is out of range), ErrNoCards,
// *IsolationError (the node's isolation label refuses the pod or is invalid), the
// *policy.FitError of pol.Place naming the per-card shortfall, or for a pod with a card choice
// (req.Choice) a *ChoiceError: only the cards it allows count; *ComputeError when no card
// takes the pod by compute (computeCards). req must be non-zero and valid.
func (c *Cache) Fits(nodeName string, req gpushare.PodRequest, pol policy.Policy) error {
	return c.fits(c.node(nodeName), req, pol)
}

// FitsEach calls verdict(i, err) with Fits' answer for every names[i], looking all nodes
// up under one read lock: the filter handler's loop over thousands of nodes.
func (c *Cache) FitsEach(names []string, req gpushare.PodRequest, pol policy.Policy, verdict func(i int, err error)) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for i, name := range names {
		verdict(i, c.fits(c.nodes[name], req, pol))
	}
}

func (c *Cache) fits(n *nodeState, req gpushare.PodRequest, pol policy.Policy) error {
	if n == nil {
		return ErrUnknownNode
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if req.Choice.Restricts() || n.sortsByCompute(req) {
		// The shortcuts and the memo look at every card; only the allowed ones count.
		if err := n.admits(req); err != nil {
			return err
		}
		_, err := n.placeOn(req, pol)
		return err
	}
	// A memory limit is for admits to judge (the node's mode and its largest card).
	if n.plain && !req.Limited() && n.fitsOneContainer(req) {
		return nil // admits would pass: the usual answer, read from one cache line
	}
	if err := n.admits(req); err != nil {
		return err
	}
	if n.fitsOneContainer(req) {
		return nil
	}
	var key missMemo
	if len(req.Containers) == 1 {
		key = missMemo{policy: pol.Name(), need: req.Containers[0].PerCard(), cards: req.Containers[0].Cards}
		if m := n.lastMiss; m.err != nil && m.policy == key.policy && m.need == key.need && m.cards == key.cards {
			return m.err
		}
	}
	_, err := pol.Place(n.view(), req)
	if err != nil && len(req.Containers) == 1 {
		key.err = err
		n.lastMiss = key
	}
	return err
}

// fitsOneContainer is the allocation-free shortcut for the usual pod with one gpu-mem
// container: it fits exactly when `Cards` cards have PerCard free, which is what every
// policy's Place decides for such a pod (TestFitsAgreesWithPlace holds it to that). For
// other pods it returns false and the caller asks Place.
func (n *nodeState) fitsOneContainer(req gpushare.PodRequest) bool {
	if len(req.Containers) != 1 {
		return false
	}
	c := req.Containers[0]
	need, want := c.PerCard(), c.Cards
	if want <= int(n.nTop) {
		return n.topFree[want-1] >= need
	}
	for i := range n.cards {
		if n.cards[i].Free() >= need {
			if want--; want == 0 {
				return true
			}
		}
	}
	return false
}

package cache

import (
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// Counted returns the node where the ledger counts the pod uid (placed or reserved) and the
// gpu-mem units it counts on each card there: what evicting the pod would free. false when
// the ledger counts nothing for uid.
func (c *Cache) Counted(uid types.UID) (node string, usage gpushare.CardUnits, ok bool) {
	c.podsMu.Lock()
	node, ok = c.where[uid]
	c.podsMu.Unlock()
	if !ok {
		return "", nil, false
	}
	n := c.node(node)
	if n == nil {
		return "", nil, false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	e, ok := n.pods[uid]
	if !ok {
		return "", nil, false
	}
	usage = gpushare.CardUnits{}
	for _, u := range e.counted() {
		usage[u.card] += u.units
	}
	return node, usage, true
}

// PlaceWith is pol.Place of req on the named node as it would be with delta applied to its
// cards' used units (delta[card] > 0 takes units, < 0 frees them; a card's used units never
// go below 0): a scheduler's preemption dry run asks whether the pod fits once some pods are
// gone, or other pods added. The node's cards are copied, so the ledger is not changed.
// Errors as Fits: ErrUnknownNode, *InventoryError, ErrNoCards, *IsolationError, *policy.FitError,
// *ChoiceError.
func (c *Cache) PlaceWith(nodeName string, req gpushare.PodRequest, pol policy.Policy, delta gpushare.CardUnits) (policy.Placement, error) {
	n := c.node(nodeName)
	if n == nil {
		return policy.Placement{}, ErrUnknownNode
	}
	n.mu.Lock()
	if err := n.admits(req); err != nil {
		n.mu.Unlock()
		return policy.Placement{}, err
	}
	cards, err := n.allowedCards(slices.Clone(n.cards), req)
	n.mu.Unlock()
	if err != nil {
		return policy.Placement{}, err
	}
	for i := range cards {
		cards[i].Used += delta[cards[i].Index]
		if cards[i].Used < 0 {
			cards[i].Used = 0
		}
	}
	return placeChoosing(policy.Node{Name: nodeName, Cards: cards}, req, pol)
}

package cache

import (
	"sort"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// NodeInfo is a copy of one node's accounting, in gpu-mem units. Its JSON form is the
// extender's /inspect answer, which keeps the old extender's shape ({"name", "totalGPU",
// "usedGPU", "devs": [{"id", "totalGPU", "usedGPU", "pods": [{"name", "namespace",
// "usedGPU"}]}]}) and adds fields old readers ignore.
//
// On an unhealthy card, Used still counts (its pods hold that memory until they go) but
// Total does not (nothing new can be placed there): a node's Used sums every card, its Total
// the healthy ones, so Used may exceed Total while a card is down. Placement sees the same
// card as offering nothing (policy.Card.Free).
type NodeInfo struct {
	Name   string                   `json:"name"`
	Total  int64                    `json:"totalGPU"` // sum of healthy cards' Total
	Used   int64                    `json:"usedGPU"`  // sum of every card's Used
	Cards  []CardInfo               `json:"devs"`
	Known  bool                     `json:"-"` // false: no node object matches any more, but pods still hold units here
	Source gpushare.InventorySource `json:"-"`
}

// CardInfo is one card. A card with Total 0 and !Healthy that still has pods is an index
// the inventory no longer lists.
type CardInfo struct {
	Index   int       `json:"id"`
	Total   int64     `json:"totalGPU"`
	Used    int64     `json:"usedGPU"` // held by placed and reserved pods
	UUID    string    `json:"uuid,omitempty"`
	Model   string    `json:"model,omitempty"`
	Healthy bool      `json:"healthy"`
	Pods    []PodInfo `json:"pods"` // by namespace/name; never nil
}

// PodInfo is what one pod holds on one card.
type PodInfo struct {
	Name      string    `json:"name"`
	Namespace string    `json:"namespace"`
	UID       types.UID `json:"uid"`
	Units     int64     `json:"usedGPU"`
	Reserved  bool      `json:"reserved"` // reserved at bind; not yet seen bound
	// Conservative: the pod never showed a valid allocation record (placed without the
	// extender, a tampered record, or an invalid request): it counts its peak per-card need
	// on every card of the node.
	Conservative bool `json:"conservative,omitempty"`
}

// Inspect returns every node, by name.
func (c *Cache) Inspect() []NodeInfo {
	c.mu.RLock()
	states := make([]*nodeState, 0, len(c.nodes))
	for _, n := range c.nodes {
		states = append(states, n)
	}
	c.mu.RUnlock()
	out := make([]NodeInfo, 0, len(states))
	for _, n := range states {
		out = append(out, n.info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// InspectNode returns one node; false when the cache has no such node.
func (c *Cache) InspectNode(name string) (NodeInfo, bool) {
	n := c.node(name)
	if n == nil {
		return NodeInfo{}, false
	}
	return n.info(), true
}

func (n *nodeState) info() NodeInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	ni := NodeInfo{Name: n.name, Known: n.known, Source: n.source, Cards: make([]CardInfo, 0, len(n.cards))}
	for _, c := range n.cards {
		ci := CardInfo{Index: c.Index, Healthy: c.Healthy, Total: c.Total, Used: c.Used, Pods: []PodInfo{}}
		if d, ok := n.device(c.Index); ok {
			ci.UUID, ci.Model = d.UUID, d.Model
		}
		for uid, e := range n.pods {
			if u := e.counted().on(c.Index); u > 0 {
				ci.Pods = append(ci.Pods, PodInfo{Name: e.name, Namespace: e.namespace, UID: uid, Units: u,
					Reserved: e.reserved, Conservative: e.basis == basisConservative})
			}
		}
		sort.Slice(ci.Pods, func(i, j int) bool {
			a, b := ci.Pods[i], ci.Pods[j]
			if a.Namespace != b.Namespace {
				return a.Namespace < b.Namespace
			}
			return a.Name < b.Name
		})
		ni.Cards = append(ni.Cards, ci)
		ni.Used += c.Used
		if c.Healthy {
			ni.Total += c.Total
		}
	}
	return ni
}

package cache

import (
	"sort"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// NodeInfo is a copy of one node's accounting. Units are gpu-mem units.
type NodeInfo struct {
	Name   string
	Known  bool // false: no node object matches any more, but pods still hold units here
	Source gpushare.InventorySource
	Cards  []CardInfo
}

// CardInfo is one card. A card with Total 0 and !Healthy that still has pods is an index
// the inventory no longer lists.
type CardInfo struct {
	Index   int
	UUID    string
	Model   string
	Healthy bool
	Total   int64
	Used    int64
	Pods    []PodInfo // by namespace/name
}

// PodInfo is what one pod holds on one card.
type PodInfo struct {
	Name      string
	Namespace string
	UID       types.UID
	Units     int64
	Reserved  bool // reserved at bind; not yet seen bound
}

// TotalUnits sums the sizes of healthy cards.
func (n NodeInfo) TotalUnits() int64 {
	var t int64
	for _, c := range n.Cards {
		if c.Healthy {
			t += c.Total
		}
	}
	return t
}

// UsedUnits sums what pods hold on all cards.
func (n NodeInfo) UsedUnits() int64 {
	var t int64
	for _, c := range n.Cards {
		t += c.Used
	}
	return t
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
		ci := CardInfo{Index: c.Index, Healthy: c.Healthy, Total: c.Total, Used: c.Used}
		if d, ok := n.device(c.Index); ok {
			ci.UUID, ci.Model = d.UUID, d.Model
		}
		for uid, p := range n.pods {
			if u := p.usage.on(c.Index); u > 0 {
				ci.Pods = append(ci.Pods, PodInfo{Name: p.name, Namespace: p.namespace, UID: uid, Units: u, Reserved: p.reserved})
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
	}
	return ni
}

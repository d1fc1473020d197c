package cache

import (
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// Inspect returns a copy of every node's accounting, by name: the extender's /inspect answer.
// An unhealthy card counts in its node's Used but not in its Total (gpushare.InspectNode);
// placement sees it as offering nothing (policy.Card.Free).
func (c *Cache) Inspect() []gpushare.InspectNode {
	c.mu.RLock()
	states := make([]*nodeState, 0, len(c.nodes))
	for _, n := range c.nodes {
		states = append(states, n)
	}
	c.mu.RUnlock()
	out := make([]gpushare.InspectNode, 0, len(states))
	for _, n := range states {
		out = append(out, n.info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// InspectNode returns a copy of one node's accounting; false when the cache has no such node.
func (c *Cache) InspectNode(name string) (gpushare.InspectNode, bool) {
	n := c.node(name)
	if n == nil {
		return gpushare.InspectNode{}, false
	}
	return n.info(), true
}

func (n *nodeState) info() gpushare.InspectNode {
	n.mu.Lock()
	defer n.mu.Unlock()
	ni := gpushare.InspectNode{Name: n.name, Cards: make([]gpushare.InspectCard, 0, len(n.cards))}
	for _, c := range n.cards {
		ci := gpushare.InspectCard{Index: c.Index, Healthy: c.Healthy, Total: c.Total, Used: c.Used, Pods: []gpushare.InspectPod{}}
		if d, ok := n.device(c.Index); ok {
			ci.UUID, ci.Model = d.UUID, d.Model
		}
		for uid, e := range n.pods {
			if u := e.counted().on(c.Index); u > 0 {
				ip := gpushare.InspectPod{Name: e.name, Namespace: e.namespace, UID: uid, Units: u,
					Reserved: e.reserved, Conservative: e.basis.unrecorded(), Charged: e.basis == basisCharged}
				if since, ok := n.unrecorded[uid]; ok && ip.Conservative {
					ip.UnrecordedSince = &metav1.Time{Time: since}
				}
				ci.Pods = append(ci.Pods, ip)
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

package cache

import (
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

func (c *Cache) nodeHandler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    c.onNode,
		UpdateFunc: func(_, obj any) { c.onNode(obj) },
		DeleteFunc: c.onNodeDelete,
	}
}

// onNode applies a node's current inventory: card count or size changes take effect at
// once; pods keep their usage even on a card that shrank or vanished.
func (c *Cache) onNode(obj any) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		klog.ErrorS(nil, "node handler got an unexpected object", "type", typeName(obj))
		return
	}
	inv, src, err := c.res.NodeInventory(node)
	if err != nil {
		// The fallback inventory is still usable; the node should be fixed, not ignored.
		klog.ErrorS(err, "reading node GPU inventory; using the fallback", "node", node.Name, "source", src)
	}
	n := c.nodeOrCreate(node.Name)
	n.mu.Lock()
	n.known = true
	n.setInventory(inv, src)
	over := overcommitted(n)
	n.mu.Unlock()
	if len(over) > 0 {
		klog.InfoS("node cards hold more than they have (card shrank or vanished under running pods)",
			"node", node.Name, "cards", over)
	}
	klog.V(4).InfoS("node inventory applied", "node", node.Name, "source", src, "cards", len(inv.Devices))
}

func overcommitted(n *nodeState) []int {
	var out []int
	for _, c := range n.cards {
		if c.Used > c.Total {
			out = append(out, c.Index)
		}
	}
	return out
}

// onNodeDelete forgets the node's cards. Its state stays while pods still hold units there
// (they leave through their own delete events).
func (c *Cache) onNodeDelete(obj any) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	node, ok := obj.(*corev1.Node)
	if !ok {
		klog.ErrorS(nil, "node delete handler got an unexpected object", "type", typeName(obj))
		return
	}
	c.podsMu.Lock()
	defer c.podsMu.Unlock()
	if n := c.node(node.Name); n != nil {
		n.mu.Lock()
		n.known = false
		n.setInventory(emptyInventory, "")
		n.mu.Unlock()
	}
	c.dropIfEmpty(node.Name)
	klog.V(2).InfoS("node removed from the gpushare cache", "node", node.Name)
}

package cache

import (
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
	node, ok := obj.(*slimNode)
	if !ok {
		klog.ErrorS(nil, "node handler got an unexpected object", "type", typeName(obj))
		return
	}
	inv, src := node.inv, node.src
	if node.isoErr != nil {
		klog.ErrorS(node.isoErr, "node's isolation label is invalid; it takes no GPU pod until fixed", "node", node.name)
	}
	if node.invErr != nil {
		// The fallback inventory is still usable; the node should be fixed, not ignored.
		klog.ErrorS(node.invErr, "reading node GPU inventory; using the fallback", "node", node.name, "source", src)
	}
	n := c.nodeOrCreate(node.name)
	n.mu.Lock()
	n.known = true
	n.isolation, n.isolationErr = node.iso, node.isoErr
	before := n.healthyUnits()
	n.setInventory(inv, src)
	c.units.Add(n.healthyUnits() - before)
	over := overcommitted(n)
	notices := n.takeNotices()
	n.mu.Unlock()
	c.send(notices)
	if len(over) > 0 {
		klog.InfoS("node cards hold more than they have (card shrank or vanished under running pods)",
			"node", node.name, "cards", over)
	}
	klog.V(4).InfoS("node inventory applied", "node", node.name, "source", src, "cards", len(inv.Devices))
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
	node, ok := untomb(obj).(*slimNode)
	if !ok {
		klog.ErrorS(nil, "node delete handler got an unexpected object", "type", typeName(obj))
		return
	}
	c.podsMu.Lock()
	defer c.podsMu.Unlock()
	if n := c.node(node.name); n != nil {
		n.mu.Lock()
		n.known = false
		n.isolation, n.isolationErr = "", nil
		before := n.healthyUnits()
		n.setInventory(emptyInventory, "")
		c.units.Add(n.healthyUnits() - before)
		notices := n.takeNotices()
		n.mu.Unlock()
		c.send(notices)
	}
	c.dropIfEmpty(node.name)
	klog.V(2).InfoS("node removed from the gpushare cache", "node", node.name)
}

package cache

import (
	"errors"

	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/gpushare"
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
	var outOfRange error
	switch {
	case errors.As(node.invErr, new(*gpushare.RangeError)):
		outOfRange = node.invErr
		klog.ErrorS(node.invErr, "node's GPU inventory is out of range; it takes no GPU pod and counts in no capacity until fixed",
			"node", node.name, "source", src)
	case node.invErr != nil:
		// The fallback inventory is still usable; the node should be fixed, not ignored.
		klog.ErrorS(node.invErr, "reading node GPU inventory; using the fallback", "node", node.name, "source", src)
	}
	n := c.nodeOrCreate(node.name)
	n.mu.Lock()
	n.known = true
	n.isolation, n.isolationErr = codeOfIsolation(node.iso), node.isoErr
	n.inventoryErr = outOfRange
	n.unitMiB = 0
	if src == gpushare.FromAnnotation && node.invErr == nil {
		n.unitMiB = uint32(inv.Unit.MiB) // ParseUnit bounds it by 2^30
	}
	n.setInventory(inv, c.graceClock())
	c.capacity.set(node.name, shareOf(inv.Unit, n.healthyUnits()))
	over := overcommitted(n)
	notices := n.takeNotices()
	n.mu.Unlock()
	c.send(notices)
	if len(over) > 0 && outOfRange == nil {
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
		n.isolation, n.isolationErr, n.inventoryErr = 0, nil, nil
		n.setInventory(emptyInventory, c.graceClock())
		c.capacity.set(node.name, capacityShare{})
		notices := n.takeNotices()
		n.mu.Unlock()
		c.send(notices)
	}
	c.dropIfEmpty(node.name)
	klog.V(2).InfoS("node removed from the gpushare cache", "node", node.name)
}

package cache

import "github.com/gpushare/gpushare/pkg/policy"

// ViewEach calls visit(i, node) for every names[i] with the node as policy sees it: its
// cards (none for a node the cache does not know) and, with Config.TrackWorkload, its free
// CPU and memory (Host nil when unknown) and the pods' node constraints it fails (Unmet). This is the prioritize path, thousands of nodes
// per call: nodes are looked up under one read lock of the node map, and each is visited
// under its own lock without copying. node, its Cards and its Host are the cache's, valid
// only during visit: visit must only read them, must not keep them, and must not call the
// cache.
func (c *Cache) ViewEach(names []string, visit func(i int, node policy.Node)) {
	var hosts [hostBlock]hostFree // one block at a time: every node.Host points in here
	c.mu.RLock()
	defer c.mu.RUnlock()
	for lo := 0; lo < len(names); lo += hostBlock {
		block := names[lo:min(lo+hostBlock, len(names))]
		if c.hosts != nil {
			c.hosts.freeEach(hosts[:len(block)], nil, func(k int) string { return block[k] })
		}
		for k, name := range block {
			node := policy.Node{Name: name}
			if h := &hosts[k]; h.known {
				node.Host, node.Unmet = &h.free, h.unmet
			}
			if n := c.nodes[name]; n != nil {
				n.visitCards(lo+k, node, visit)
				continue
			}
			visit(lo+k, node)
		}
	}
}

// visitCards calls visit with node's cards set to n's, under n.mu.
func (n *nodeState) visitCards(i int, node policy.Node, visit func(i int, node policy.Node)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.known {
		node.Cards = n.cards
	}
	visit(i, node)
}

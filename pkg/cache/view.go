package cache

import (
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// ViewEach calls visit(i, node) for every names[i] with the node as policy sees it for a pod
// with card choice choice (nil: none): ViewEachFor of a request with that choice and no
// compute share.
func (c *Cache) ViewEach(names []string, choice *gpushare.CardChoice, visit func(i int, node policy.Node)) {
	c.ViewEachFor(names, gpushare.PodRequest{Choice: choice}, visit)
}

// ViewEachFor calls visit(i, node) for every names[i] with the node as policy sees it for a
// pod asking req: its cards (only those req's card choice allows and compute leaves it,
// computeCards; none for a node the cache does not know) and, with Config.TrackWorkload, its
// free CPU and memory (Host nil when unknown) and the pods' node constraints it fails
// (Unmet). This is the prioritize path, thousands of nodes per call: nodes are looked up
// under one read lock of the node map, and each is visited under its own lock without
// copying. node, its Cards and its Host are the cache's, valid only during visit: visit must
// only read them, must not keep them, and must not call the cache.
func (c *Cache) ViewEachFor(names []string, req gpushare.PodRequest, visit func(i int, node policy.Node)) {
	var hosts [hostBlock]hostFree // one block at a time: every node.Host points in here
	cv := cardVisitor{req: req, visit: visit}
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
				cv.cards(n, lo+k, node)
				continue
			}
			visit(lo+k, node)
		}
	}
}

// cardVisitor visits nodes with their cards as a pod asking req sees them.
type cardVisitor struct {
	req   gpushare.PodRequest
	visit func(i int, node policy.Node)
	buf   []policy.Card // the allowed cards of the node being visited, reused node by node
}

// cards calls visit with node's cards set to n's (those the choice allows and compute leaves
// req), under n.mu.
func (v *cardVisitor) cards(n *nodeState, i int, node policy.Node) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.known {
		node.Cards = n.cards
		if v.req.Choice.Restricts() {
			// None allowed leaves no cards: the pod fits nowhere here.
			v.buf, _ = n.allowedInto(v.buf, n.cards, v.req.Choice)
			node.Cards = v.buf
		}
		if n.sortsByCompute(v.req) {
			node.Cards, _ = n.computeCards(node.Cards, v.req)
		}
	}
	v.visit(i, node)
}

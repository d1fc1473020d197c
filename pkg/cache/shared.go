package cache

import (
	"fmt"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
)

// registerShared adds one handler to each informer of a Shared config: it derives the slim
// object of every event once and hands it to the cache's handlers, so the informers keep
// the full objects their owner reads.
func (c *Cache) registerShared(cfg Config, nodeHandlers, podHandlers []toolscache.ResourceEventHandler) error {
	sel := cfg.NodeSelector
	if sel == nil {
		sel = labels.Everything()
	}
	withHost := c.hosts != nil
	nodes := &slimming{handlers: nodeHandlers, after: c.indexNode, slim: func(obj any) (any, bool) {
		node, ok := obj.(*corev1.Node)
		if !ok {
			return obj, true // already slim: the handlers say what else is unexpected
		}
		if !sel.Matches(labels.Set(node.Labels)) {
			return nil, false
		}
		return newSlimNode(node, cfg.Resources, withHost), true
	}}
	pods := &slimming{handlers: podHandlers, slim: func(obj any) (any, bool) {
		if pod, ok := obj.(*corev1.Pod); ok {
			return newPod(pod, cfg.Resources, c.constraints), true
		}
		return obj, true
	}}
	nodeReg, err := cfg.Nodes.AddEventHandler(nodes)
	if err != nil {
		return fmt.Errorf("adding the node event handler: %w", err)
	}
	podReg, err := cfg.Pods.AddEventHandler(pods)
	if err != nil {
		return fmt.Errorf("adding the pod event handler: %w", err)
	}
	c.synced = append(c.synced, nodeReg.HasSynced, podReg.HasSynced)
	return nil
}

// slimming is a handler that passes each event's slim object to handlers. slim returns
// false for an object the cache does not account (a node outside the selector): an update
// into or out of the selection reaches handlers as an add or a delete.
type slimming struct {
	handlers []toolscache.ResourceEventHandler
	slim     func(obj any) (any, bool)
	// after, when set, is called with the full objects once handlers have seen an event:
	// old is nil on add, obj nil on delete.
	after func(old, obj any)
}

func (s *slimming) done(old, obj any) {
	if s.after != nil {
		s.after(old, obj)
	}
}

func (s *slimming) OnAdd(obj any, isInInitialList bool) {
	if o, ok := s.slim(obj); ok {
		for _, h := range s.handlers {
			h.OnAdd(o, isInInitialList)
		}
	}
	s.done(nil, obj)
}

func (s *slimming) OnUpdate(oldObj, newObj any) {
	o, oldOK := s.slim(oldObj)
	n, newOK := s.slim(newObj)
	for _, h := range s.handlers {
		switch {
		case oldOK && newOK:
			h.OnUpdate(o, n)
		case newOK:
			h.OnAdd(n, false)
		case oldOK:
			h.OnDelete(o)
		}
	}
	s.done(oldObj, newObj)
}

func (s *slimming) OnDelete(obj any) {
	full := untomb(obj)
	if full == nil {
		return
	}
	defer s.done(full, nil)
	o, ok := s.slim(full)
	if !ok {
		return
	}
	if t, tomb := obj.(toolscache.DeletedFinalStateUnknown); tomb {
		o = toolscache.DeletedFinalStateUnknown{Key: t.Key, Obj: o}
	}
	for _, h := range s.handlers {
		h.OnDelete(o)
	}
}

// indexNode keeps Config.Shared's index from the informer's node objects to their states
// (Cache.NodeState): the owner of the informer hands the same objects to the cache's
// callers, and a pointer is looked up without reading the node's name, which thousands
// of lookups per scheduling cycle would each fetch from memory. A node outside the
// selector maps to notGPUNode.
func (c *Cache) indexNode(old, obj any) {
	ix := indexed{st: notGPUNode}
	n, ok := obj.(*corev1.Node)
	if ok {
		if s := c.node(n.Name); s != nil {
			ix.st = s
		}
		if c.hosts != nil {
			ix.host = c.hosts.ref(n.Name)
		}
	}
	c.byObjMu.Lock()
	defer c.byObjMu.Unlock()
	if o, isNode := old.(*corev1.Node); isNode {
		delete(c.byObj, o)
	}
	if ok {
		c.byObj[n] = ix
	}
}

// indexed is what the index holds for a node object: its state and, with
// Config.TrackWorkload, its host book entry as of the object's event (nil: none then).
type indexed struct {
	st   *nodeState
	host hostRef
}

// notGPUNode is the state of every node the cache does not account: never known.
var notGPUNode = newNodeState("")

// stateOf is the state of the node whose informer object is node (an object a Shared
// cache's informer holds or held), found by the object's address, else by its name; nil
// when the cache has no state of that name.
func (c *Cache) stateOf(node *corev1.Node) *nodeState {
	c.byObjMu.RLock()
	ix, ok := c.byObj[node]
	c.byObjMu.RUnlock()
	if ok {
		return ix.st
	}
	return c.node(node.Name)
}

// FitsNode is Fits for the node whose object is node: a Shared cache finds the object in
// its index without reading the name (see indexNode).
func (c *Cache) FitsNode(node *corev1.Node, req gpushare.PodRequest, pol policy.Policy) error {
	return c.fits(c.stateOf(node), req, pol)
}

// ViewNodes is ViewEachFor for nodes given by their objects (see FitsNode), all looked up
// under one read lock of the index. A node's name is read from its state, not from the
// object, whose memory is seldom in cache (see nodeState).
func (c *Cache) ViewNodes(nodes []*corev1.Node, req gpushare.PodRequest, visit func(i int, node policy.Node)) {
	var (
		hosts  [hostBlock]hostFree // one block at a time: every node.Host points in here
		refs   [hostBlock]hostRef
		states [hostBlock]*nodeState
		names  [hostBlock]string
		cv     = cardVisitor{req: req, visit: visit}
	)
	c.byObjMu.RLock()
	defer c.byObjMu.RUnlock()
	for lo := 0; lo < len(nodes); lo += hostBlock {
		block := nodes[lo:min(lo+hostBlock, len(nodes))]
		for k, obj := range block {
			ix, ok := c.byObj[obj]
			if !ok {
				ix = indexed{st: c.node(obj.Name)}
			}
			states[k], refs[k] = ix.st, ix.host
			if ix.st != nil && ix.st.name != "" { // notGPUNode has none
				names[k] = ix.st.name
			} else {
				names[k] = obj.Name
			}
		}
		if c.hosts != nil {
			c.hosts.freeEach(hosts[:len(block)], refs[:len(block)], func(k int) string { return names[k] })
		}
		for k := range block {
			node := policy.Node{Name: names[k]}
			if h := &hosts[k]; h.known {
				node.Host, node.Unmet = &h.free, h.unmet
			}
			if n := states[k]; n != nil {
				cv.cards(n, lo+k, node)
				continue
			}
			visit(lo+k, node)
		}
	}
}

package cache

import (
	"fmt"

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
	nodes := &slimming{handlers: nodeHandlers, slim: func(obj any) (any, bool) {
		node, ok := obj.(*corev1.Node)
		if !ok {
			return obj, true // already slim: the handlers say what else is unexpected
		}
		if !sel.Matches(labels.Set(node.Labels)) {
			return nil, false
		}
		return newSlimNode(node, cfg.Resources), true
	}}
	pods := &slimming{handlers: podHandlers, slim: func(obj any) (any, bool) {
		if pod, ok := obj.(*corev1.Pod); ok {
			return newPod(pod, cfg.Resources, withHost), true
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
}

func (s *slimming) OnAdd(obj any, isInInitialList bool) {
	if o, ok := s.slim(obj); ok {
		for _, h := range s.handlers {
			h.OnAdd(o, isInInitialList)
		}
	}
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
}

func (s *slimming) OnDelete(obj any) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		if t.Obj == nil {
			return
		}
		o, ok := s.slim(t.Obj)
		if !ok {
			return
		}
		obj = toolscache.DeletedFinalStateUnknown{Key: t.Key, Obj: o}
	} else {
		o, ok := s.slim(obj)
		if !ok {
			return
		}
		obj = o
	}
	for _, h := range s.handlers {
		h.OnDelete(obj)
	}
}

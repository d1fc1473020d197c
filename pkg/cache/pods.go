package cache

import (
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

var emptyInventory gpushare.Inventory

func typeName(obj any) string { return fmt.Sprintf("%T", obj) }

// podHandler only lets through pods that request gpu-mem (or whose request is invalid, so
// that their annotations, if any, still count). Tombstones are unwrapped.
func (c *Cache) podHandler() toolscache.ResourceEventHandler {
	return toolscache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			pod, ok := obj.(*corev1.Pod)
			if !ok {
				return false
			}
			req, err := c.res.PodRequest(pod)
			return err != nil || !req.IsZero()
		},
		Handler: toolscache.ResourceEventHandlerFuncs{
			AddFunc:    c.onPod,
			UpdateFunc: func(_, obj any) { c.onPod(obj) },
			DeleteFunc: c.onPodDelete,
		},
	}
}

func terminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// onPod brings the pod's accounting in line with the object: bound with an allocation
// annotation → placed (a reservation of the same uid becomes the placed pod, never counted
// twice); Succeeded/Failed → gone; not yet bound → a reservation stays as it is.
func (c *Cache) onPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		klog.ErrorS(nil, "pod handler got an unexpected object", "type", typeName(obj))
		return
	}
	if terminal(pod) {
		c.forget(pod.UID, false)
		return
	}
	alloc, placed, err := c.res.ReadAllocation(pod)
	if err != nil {
		klog.ErrorS(err, "reading pod GPU allocation; pod not counted", "pod", klog.KObj(pod))
	}
	if !placed || pod.Spec.NodeName == "" {
		// A reservation waits for the bound pod (or expires); anything else is dropped.
		c.forget(pod.UID, true)
		return
	}
	entry := &podEntry{name: pod.Name, namespace: pod.Namespace, usage: alloc.CardUsage(pod)}
	c.place(pod.UID, pod.Spec.NodeName, entry)
}

func (c *Cache) onPodDelete(obj any) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		klog.ErrorS(nil, "pod delete handler got an unexpected object", "type", typeName(obj))
		return
	}
	c.forget(pod.UID, false)
}

// place records uid on nodeName with entry, moving it from any other node.
func (c *Cache) place(uid types.UID, nodeName string, entry *podEntry) {
	c.podsMu.Lock()
	defer c.podsMu.Unlock()
	if cur, ok := c.where[uid]; ok && cur != nodeName {
		c.removeLocked(uid, false)
	}
	n := c.nodeOrCreate(nodeName)
	n.mu.Lock()
	if old, ok := n.pods[uid]; ok && !old.reserved && maps.Equal(old.usage, entry.usage) {
		n.mu.Unlock() // status-only update: nothing to recompute
		return
	}
	n.pods[uid] = entry
	n.recompute()
	var over []int
	if n.known { // pods may arrive before their node: nothing to warn about yet
		over = overcommitted(n)
	}
	n.mu.Unlock()
	c.where[uid] = nodeName
	delete(c.reserved, uid)
	if len(over) > 0 {
		klog.InfoS("pod placed on over-committed cards (another scheduler or a stale view?)",
			"pod", klog.KRef(entry.namespace, entry.name), "node", nodeName, "cards", over)
	}
}

// forget removes uid's accounting; with keepReservation a reservation survives.
func (c *Cache) forget(uid types.UID, keepReservation bool) {
	c.podsMu.Lock()
	defer c.podsMu.Unlock()
	c.removeLocked(uid, keepReservation)
}

// removeLocked removes uid from its node (a reservation only when !keepReservation) and
// reports whether it did. Caller holds podsMu.
func (c *Cache) removeLocked(uid types.UID, keepReservation bool) bool {
	nodeName, ok := c.where[uid]
	if !ok {
		return false
	}
	n := c.node(nodeName)
	if n == nil { // cannot happen: a node holding pods is never dropped
		delete(c.where, uid)
		delete(c.reserved, uid)
		return false
	}
	n.mu.Lock()
	e, ok := n.pods[uid]
	if ok && e.reserved && keepReservation {
		n.mu.Unlock()
		return false
	}
	if ok {
		delete(n.pods, uid)
		n.recompute()
	}
	n.mu.Unlock()
	delete(c.where, uid)
	delete(c.reserved, uid)
	c.dropIfEmpty(nodeName)
	return ok
}

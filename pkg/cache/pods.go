package cache

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

var emptyInventory gpushare.Inventory

func typeName(obj any) string { return fmt.Sprintf("%T", obj) }

// untomb returns the last known object a DeletedFinalStateUnknown carries (nil when the
// informer had none), else obj.
func untomb(obj any) any {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

// podHandler only lets through pods that share a GPU (Pod.sharesGPU). Tombstones are
// unwrapped.
func (c *Cache) podHandler() toolscache.ResourceEventHandler {
	return toolscache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			pod, ok := untomb(obj).(*Pod)
			return ok && pod.sharesGPU()
		},
		Handler: toolscache.ResourceEventHandlerFuncs{
			AddFunc:    c.onPod,
			UpdateFunc: func(_, obj any) { c.onPod(obj) },
			DeleteFunc: c.onPodDelete,
		},
	}
}

// onPod brings the pod's accounting in line with the object: bound → placed (a reservation
// of the same uid becomes the placed pod, never counted twice; what it counts is decided by
// nodeState.decide, whatever its annotations say); Succeeded/Failed → gone; not yet bound →
// a reservation stays as it is.
func (c *Cache) onPod(obj any) {
	pod, ok := obj.(*Pod)
	if !ok {
		klog.ErrorS(nil, "pod handler got an unexpected object", "type", typeName(obj))
		return
	}
	if pod.terminal {
		c.forget(pod.uid, false)
		return
	}
	if pod.nodeName == "" {
		// A reservation waits for the bound pod (or expires); anything else is dropped.
		c.forget(pod.uid, true)
		return
	}
	c.place(pod)
}

func (c *Cache) onPodDelete(obj any) {
	pod, ok := untomb(obj).(*Pod)
	if !ok {
		klog.ErrorS(nil, "pod delete handler got an unexpected object", "type", typeName(obj))
		return
	}
	c.forget(pod.uid, false)
}

// Pod returns the pod namespace/name as the pod informer holds it; false when the informer
// holds no such pod (not seen yet, or deleted).
func (c *Cache) Pod(namespace, name string) (*Pod, bool) {
	obj, ok, err := c.podStore.GetByKey(toolscache.NewObjectName(namespace, name).String())
	if err != nil || !ok { // the informer's store never errors
		return nil, false
	}
	switch pod := obj.(type) {
	case *Pod:
		return pod, true
	case *corev1.Pod: // a Shared informer keeps full objects
		return NewPod(pod, c.res), true
	}
	return nil, false
}

// place records a bound pod on its node, moving it from any other node.
func (c *Cache) place(pod *Pod) {
	uid, nodeName := pod.uid, pod.nodeName
	c.podsMu.Lock()
	defer c.podsMu.Unlock()
	if cur, ok := c.where[uid]; ok && cur != nodeName {
		c.removeLocked(uid, false)
	}
	n := c.nodeOrCreate(nodeName)
	n.mu.Lock()
	e, ok := n.pods[uid]
	if ok && e.basis == basisRecord && e.state == recordOK && pod.validRecord() && pod.unit == e.Pod.unit && slices.Equal(e.counted(), pod.usage) {
		// Same record: nothing to recompute; hold the newer object only, counting its usage
		// (equal to what the entry counted).
		e.Pod, e.own = pod, nil
		n.mu.Unlock()
		return
	}
	if !ok {
		e = &podEntry{Pod: pod}
		n.pods[uid] = e
	}
	e.setPod(pod)
	n.recompute(c.graceClock())
	var over []int
	if n.known { // pods may arrive before their node: nothing to warn about yet
		over = overcommitted(n)
	}
	notices := n.takeNotices()
	n.mu.Unlock()
	c.where[uid] = nodeName
	delete(c.reserved, uid)
	c.send(notices)
	if len(over) > 0 {
		klog.InfoS("pod placed on over-committed cards (another scheduler or a stale view?)",
			"pod", klog.KObj(pod), "node", nodeName, "cards", over)
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
	var notices []notice
	if ok {
		delete(n.pods, uid)
		delete(n.trust, uid)
		delete(n.unrecorded, uid)
		n.recompute(c.graceClock())
		notices = n.takeNotices()
	}
	n.mu.Unlock()
	c.send(notices)
	delete(c.where, uid)
	delete(c.reserved, uid)
	c.dropIfEmpty(nodeName)
	return ok
}

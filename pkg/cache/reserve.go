package cache

import (
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// Reservation is the outcome of Reserve.
type Reservation struct {
	// Placement is the chosen cards (write Placement.Allocation to the pod annotations).
	Placement policy.Placement
	// CardUnits is the size in units of each chosen card (for gpushare.BindAnnotations).
	CardUnits gpushare.CardUnits
}

// Reserve chooses cards for pod on the named node with pol.Place and holds them for the pod
// until the informer sees it bound with the allocation annotation (the reservation then
// becomes the placed pod), Release is called, or the reservation TTL passes. Choice and
// record happen under the node lock, so concurrent binds never over-commit a card. A
// previous reservation of the same pod is replaced. Errors: ErrUnknownNode, ErrNoCards,
// *policy.FitError, *AlreadyPlacedError.
func (c *Cache) Reserve(nodeName string, pod *corev1.Pod, req gpushare.PodRequest, pol policy.Policy) (Reservation, error) {
	c.podsMu.Lock()
	defer c.podsMu.Unlock()
	if cur, ok := c.where[pod.UID]; ok {
		if _, res := c.reserved[pod.UID]; !res {
			return Reservation{}, &AlreadyPlacedError{Node: cur}
		}
		c.removeLocked(pod.UID, false)
	}
	n := c.node(nodeName)
	if n == nil {
		return Reservation{}, ErrUnknownNode
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.known {
		return Reservation{}, ErrUnknownNode
	}
	if len(n.devices) == 0 {
		return Reservation{}, ErrNoCards
	}
	p, err := pol.Place(n.view(), req)
	if err != nil {
		return Reservation{}, err
	}
	n.pods[pod.UID] = &podEntry{
		name: pod.Name, namespace: pod.Namespace, usage: p.Usage,
		reserved: true, expires: c.clock.Now().Add(c.ttl),
	}
	n.recompute()
	c.where[pod.UID] = nodeName
	c.reserved[pod.UID] = nodeName
	sizes := gpushare.CardUnits{}
	for _, idx := range p.Allocation.Cards() {
		d, _ := n.device(idx) // Place only picks inventory cards
		sizes[idx] = d.Units
	}
	return Reservation{Placement: p, CardUnits: sizes}, nil
}

// Release drops the pod's reservation (a bind that failed). A pod the informer already saw
// placed is left alone. It reports whether a reservation was dropped.
func (c *Cache) Release(uid types.UID) bool {
	c.podsMu.Lock()
	defer c.podsMu.Unlock()
	if _, ok := c.reserved[uid]; !ok {
		return false
	}
	return c.removeLocked(uid, false)
}

// expire drops reservations older than the TTL whose pod never showed up bound.
func (c *Cache) expire(logger logr.Logger) {
	now := c.clock.Now()
	c.podsMu.Lock()
	defer c.podsMu.Unlock()
	for uid, nodeName := range c.reserved {
		n := c.node(nodeName)
		if n == nil {
			continue
		}
		n.mu.Lock()
		e := n.pods[uid]
		stale := e != nil && e.reserved && now.After(e.expires)
		n.mu.Unlock()
		if stale {
			c.removeLocked(uid, false)
			logger.Info("reservation expired: pod never showed up bound", "pod", klog.KRef(e.namespace, e.name), "node", nodeName)
		}
	}
}

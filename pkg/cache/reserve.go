package cache

import (
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// *policy.FitError, *AlreadyPlacedError. pod is only read for its UID, namespace and name
// (a *Pod from the informer or a *corev1.Pod).
func (c *Cache) Reserve(nodeName string, pod metav1.Object, req gpushare.PodRequest, pol policy.Policy) (Reservation, error) {
	uid := pod.GetUID()
	c.podsMu.Lock()
	defer c.podsMu.Unlock()
	if cur, ok := c.where[uid]; ok {
		if _, res := c.reserved[uid]; !res {
			return Reservation{}, &AlreadyPlacedError{Node: cur}
		}
		c.removeLocked(uid, false)
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
	n.pods[uid] = reservedEntry(&Pod{
		objectMeta: objectMeta{name: pod.GetName(), namespace: pod.GetNamespace(), uid: uid},
		nodeName:   nodeName, reserved: true, usage: usageOf(p.Usage),
	})
	n.recompute()
	c.where[uid] = nodeName
	c.reserved[uid] = reservation{node: nodeName, expires: c.clock.Now().Add(c.ttl)}
	sizes := gpushare.CardUnits{}
	for _, idx := range p.Allocation.Cards() {
		d, _ := n.device(idx) // Place only picks inventory cards
		sizes[idx] = d.Units
	}
	return Reservation{Placement: p, CardUnits: sizes}, nil
}

// reservation is when the cards Reserve chose for a pod lapse, and where.
type reservation struct {
	node    string
	expires time.Time
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
	for uid, r := range c.reserved {
		if !now.After(r.expires) {
			continue
		}
		n := c.node(r.node)
		if n == nil {
			continue
		}
		n.mu.Lock()
		p, ok := n.pods[uid]
		n.mu.Unlock()
		if ok && p.reserved {
			c.removeLocked(uid, false)
			logger.Info("reservation expired: pod never showed up bound", "pod", klog.KObj(p), "node", r.node)
		}
	}
}

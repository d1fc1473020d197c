package cache

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// Reservation is the outcome of Reserve: the cards held for a pod's bind.
type Reservation struct {
	// Placement is the chosen cards (write Placement.Allocation to the pod annotations).
	Placement policy.Placement
	// CardUnits is the size in units of each chosen card (for gpushare.BindAnnotations).
	CardUnits gpushare.CardUnits
	// Unit is the unit the node's inventory publishes, which the counts are in (for
	// gpushare.BindAnnotations); the zero Unit when the node publishes none.
	Unit gpushare.Unit
	// Since is when the cards were first held (the cache's clock): the assume time to write.
	// It stays the same across retries, so a re-issued Binding carries the same annotations.
	Since time.Time
	// Reused: the cards are those of an earlier bind of the same pod whose Binding ended
	// with its outcome unknown (it may have landed); this bind re-issues it.
	Reused bool
	// Landed: an earlier Binding with these cards succeeded. There is nothing to write and
	// no Finish to call; the hold stays until the informer shows the pod bound.
	Landed bool

	uid    types.UID
	flight *flight // the Binding call this Reservation allows; nil when Landed
}

// BindOutcome is what became of the Binding call a Reservation allowed (see Finish).
type BindOutcome int

const (
	// BindUnknown: the call failed in a way that does not tell whether the pod got bound
	// (timeout, 5xx, lost connection) and the pod was not seen bound. The cards stay held
	// until the informer shows the pod bound, a retry settles it, or expiry confirms the pod
	// unbound with the API server.
	BindUnknown BindOutcome = iota
	// BindLanded: the pod is bound with the reservation's cards. The cards stay held until
	// the informer shows the pod bound; the reservation then becomes the placed pod.
	BindLanded
	// BindRefused: the pod is definitely not bound by this reservation (the API server
	// refused the call and the pod is unbound, gone, re-created or bound elsewhere); the
	// cards are freed.
	BindRefused
)

// flight is one Binding call in progress; done is closed when Finish reports its outcome.
type flight struct {
	done     chan struct{}
	finished bool // podsMu
	// waiting counts the retries blocked in Reserve on this call's outcome (podsMu), so that
	// a test can tell a retry that waits from one that has not started.
	waiting int
}

// reservation is a bind-time hold of cards for a pod: where, what Reserve answered (so a
// retry reuses it), and the state of its Binding calls.
type reservation struct {
	node string
	// expires is when expiry may start asking the API server whether the pod got bound.
	expires time.Time
	pod     *Pod // the entry in the node's pods: name and namespace for expiry's lookup
	rsv     Reservation
	flight  *flight // the Binding call in progress; nil when none
	landed  bool    // a Binding call succeeded: only the informer (or pod deletion) ends it
	// attempt counts Binding calls, so that expiry never acts on an answer older than the
	// latest call.
	attempt int
}

// Reserve holds cards on the named node for a bind of pod and allows one Binding call,
// whose outcome the caller must report with Finish (unless Landed). Choice and record happen
// under the node lock, so concurrent binds never over-commit a card.
//
// A bind retried for a pod that already holds cards never replaces them (an earlier
// Binding may still land on them):
//   - same node: the earlier cards are reused (no new placement). While the earlier
//     Binding call is in flight, Reserve waits for its outcome, bounded by ctx (then
//     ErrBindInFlight). If it succeeded, the Reservation is Landed; if its outcome is
//     unknown, it is Reused and the caller re-issues the same Binding; if it was refused,
//     cards are chosen afresh.
//   - another node: *HeldElsewhereError.
//
// The hold lasts until the informer sees the pod bound with the allocation annotation (it
// then becomes the placed pod), Finish reports BindRefused, the pod is deleted, or expiry
// confirms with the API server that the pod is not bound. Other errors: ErrUnknownNode,
// *InventoryError, ErrNoCards, *IsolationError, *policy.FitError, *AlreadyPlacedError. pod is only read for its UID, namespace
// and name (a *Pod from the informer or a *corev1.Pod). Units are gpu-mem units.
func (c *Cache) Reserve(ctx context.Context, nodeName string, pod metav1.Object, req gpushare.PodRequest, pol policy.Policy) (Reservation, error) {
	uid := pod.GetUID()
	c.podsMu.Lock()
	defer c.podsMu.Unlock()
	for {
		r, held := c.reserved[uid]
		if !held {
			break
		}
		if r.node != nodeName {
			return Reservation{}, &HeldElsewhereError{Node: r.node}
		}
		if r.flight == nil {
			return c.reuseLocked(uid, r), nil
		}
		f := r.flight
		f.waiting++
		c.podsMu.Unlock()
		select {
		case <-f.done:
			c.podsMu.Lock()
			f.waiting--
		case <-ctx.Done():
			c.podsMu.Lock() // for the deferred Unlock
			f.waiting--
			return Reservation{}, ErrBindInFlight
		}
	}
	if cur, ok := c.where[uid]; ok {
		return Reservation{}, &AlreadyPlacedError{Node: cur}
	}
	n := c.node(nodeName)
	if n == nil {
		return Reservation{}, ErrUnknownNode
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.admits(req); err != nil {
		return Reservation{}, err
	}
	p, err := n.placeOn(req, pol)
	if err != nil {
		return Reservation{}, err
	}
	held := &Pod{
		objectMeta: objectMeta{name: pod.GetName(), namespace: pod.GetNamespace(), uid: uid},
		nodeName:   nodeName, reserved: true, usage: usageOf(p.Usage),
		compute: uint8(req.PeakCompute()),
	}
	n.pods[uid] = reservedEntry(held)
	delete(n.trust, uid)
	delete(n.unrecorded, uid)
	n.recompute(c.graceClock())
	sizes := gpushare.CardUnits{}
	for _, idx := range p.Allocation.Cards() {
		d, _ := n.device(idx) // Place only picks inventory cards
		sizes[idx] = d.Units
	}
	now := c.clock.Now()
	f := &flight{done: make(chan struct{})}
	out := Reservation{Placement: p, CardUnits: sizes, Unit: n.publishedUnit(), Since: now, uid: uid, flight: f}
	c.where[uid] = nodeName
	c.reserved[uid] = reservation{node: nodeName, expires: now.Add(c.ttl), pod: held, rsv: out, flight: f, attempt: 1}
	return out, nil
}

// reuseLocked answers a retried bind on the node that already holds the pod's cards and
// no Binding call in flight. Caller holds podsMu.
func (c *Cache) reuseLocked(uid types.UID, r reservation) Reservation {
	out := r.rsv
	out.flight = nil
	if r.landed {
		out.Landed = true
		return out
	}
	out.Reused = true
	out.flight = &flight{done: make(chan struct{})}
	r.flight = out.flight
	r.attempt++
	r.expires = c.clock.Now().Add(c.ttl)
	c.reserved[uid] = r
	return out
}

// Finish reports the outcome of the Binding call rsv allowed: BindRefused frees the cards,
// BindLanded and BindUnknown keep them (an invalid outcome counts as BindUnknown). Binds
// waiting in Reserve for the same pod then go on. It does nothing when rsv allowed no call
// (Landed, or the zero Reservation), when called again for the same call, or when the hold
// is gone meanwhile (the informer saw the pod bound, or deleted).
func (c *Cache) Finish(rsv Reservation, o BindOutcome) {
	f := rsv.flight
	if f == nil {
		return
	}
	c.podsMu.Lock()
	defer c.podsMu.Unlock()
	if f.finished {
		return
	}
	f.finished = true
	defer close(f.done)
	r, ok := c.reserved[rsv.uid]
	if !ok || r.flight != f {
		return
	}
	r.flight = nil
	switch o {
	case BindRefused:
		c.removeLocked(rsv.uid, false)
		return
	case BindLanded:
		r.landed = true
	}
	c.reserved[rsv.uid] = r
}

// HeldOn returns the node where uid holds cards for a bind whose Binding may still land
// (in flight, outcome unknown, or landed but not yet seen by the informer); false when it
// holds none.
func (c *Cache) HeldOn(uid types.UID) (string, bool) {
	c.podsMu.Lock()
	defer c.podsMu.Unlock()
	r, ok := c.reserved[uid]
	if !ok {
		return "", false
	}
	return r.node, true
}

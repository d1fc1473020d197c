package cache

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// expiryLookupTimeout bounds expiry's read of one pod from the API server.
const expiryLookupTimeout = 10 * time.Second

// expire drops the holds past their TTL that no Binding call is in flight for and whose pod
// is confirmed not bound by them. The TTL alone proves nothing: a Binding whose outcome was
// unknown may have landed, and freeing its cards would let a second pod have them.
func (c *Cache) expire(ctx context.Context) {
	logger := klog.FromContext(ctx)
	type due struct {
		uid types.UID
		r   reservation
	}
	now := c.clock.Now()
	var list []due
	c.podsMu.Lock()
	for uid, r := range c.reserved {
		if r.flight == nil && now.After(r.expires) {
			list = append(list, due{uid, r})
		}
	}
	c.podsMu.Unlock()
	// No lock across the API reads: binds and informer events go on meanwhile, and a hold is
	// dropped only if it is still the one that was checked.
	for _, d := range list {
		if ctx.Err() != nil {
			return
		}
		why, drop := c.notBoundBy(ctx, d.uid, d.r)
		if !drop {
			continue
		}
		c.podsMu.Lock()
		cur, ok := c.reserved[d.uid]
		if ok && cur.flight == nil && cur.pod == d.r.pod && cur.attempt == d.r.attempt {
			c.removeLocked(d.uid, false)
			logger.Info("reservation expired", "pod", klog.KObj(d.r.pod), "node", d.r.node, "why", why)
		}
		c.podsMu.Unlock()
	}
}

// notBoundBy reports whether the pod of hold r is definitely not bound by it, and why: the
// pod is gone, re-created (another UID), unbound, or bound to another node. A pod bound to
// the hold's node is left to the informer (the hold becomes the placed pod); a failed read
// keeps the hold until the next pass.
func (c *Cache) notBoundBy(ctx context.Context, uid types.UID, r reservation) (string, bool) {
	logger := klog.FromContext(ctx)
	ns, name := r.pod.namespace, r.pod.name
	if p, ok := c.Pod(ns, name); ok && p.uid == uid && p.nodeName != "" {
		if p.nodeName == r.node {
			return "", false
		}
		return "pod bound to node " + p.nodeName, true // a pod is bound once: no API read needed
	}
	ctx, cancel := context.WithTimeout(ctx, expiryLookupTimeout)
	defer cancel()
	pod, err := c.api.Pods(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "pod not found", true
	case err != nil:
		logger.Info("reservation past its TTL kept: reading its pod failed", "pod", klog.KRef(ns, name), "node", r.node, "err", err)
		return "", false
	case pod.UID != uid:
		return "pod re-created with UID " + string(pod.UID), true
	case pod.Spec.NodeName == "":
		return "pod not bound", true
	case pod.Spec.NodeName != r.node:
		return "pod bound to node " + pod.Spec.NodeName, true
	}
	return "", false
}

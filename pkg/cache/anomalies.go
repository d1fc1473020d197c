package cache

import (
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// anomalyCounters count the notices sent, by anomaly label.
type anomalyCounters struct {
	invalid, changed, missing atomic.Uint64
}

// AnomalyStats is how far the ledger departs from what pods' records say, for metrics.
type AnomalyStats struct {
	// Conservative is the number of placed pods counted conservatively for want of a valid
	// allocation record: on every card of their node for the grace period, then against its
	// free units as a whole (see gpushare.InspectPod.Conservative).
	Conservative int
	// Counts counts, since start, the transitions of placed pods' records by label:
	// AnomalyInvalid (unreadable, not matching the request, naming cards the node lacks, or an
	// invalid request), AnomalyChanged (a different valid allocation), AnomalyMissing (bound
	// without any card annotation). Every label is present.
	Counts map[string]uint64
}

// Anomalies returns the current AnomalyStats.
func (c *Cache) Anomalies() AnomalyStats {
	st := AnomalyStats{Counts: map[string]uint64{
		AnomalyInvalid: c.anomalies.invalid.Load(),
		AnomalyChanged: c.anomalies.changed.Load(),
		AnomalyMissing: c.anomalies.missing.Load(),
	}}
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, n := range c.nodes {
		n.mu.Lock()
		st.Conservative += len(n.unrecorded)
		n.mu.Unlock()
	}
	return st
}

// send counts the notices, logs them and records them as Warning events on their pods (and
// nodes, for onNode).
// Called without any node lock held.
func (c *Cache) send(notices []notice) {
	for _, nt := range notices {
		switch nt.anomaly {
		case AnomalyInvalid:
			c.anomalies.invalid.Add(1)
		case AnomalyChanged:
			c.anomalies.changed.Add(1)
		case AnomalyMissing:
			c.anomalies.missing.Add(1)
		}
		what := "pod GPU allocation record not taken as written"
		if nt.reason == EventUnrecordedPod {
			what = "pod without a GPU allocation record holds its node's free units"
		}
		klog.InfoS(what, "pod", klog.KObj(nt.pod), "node", nt.pod.nodeName, "reason", nt.reason, "message", nt.msg)
		if c.recorder == nil {
			continue
		}
		ref := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1",
			Namespace: nt.pod.namespace, Name: nt.pod.name, UID: nt.pod.uid}
		c.recorder.Event(ref, corev1.EventTypeWarning, nt.reason, nt.msg)
		if nt.onNode {
			// Nodes' events carry the node's name as UID, as kubelet's do.
			node := &corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: nt.pod.nodeName, UID: types.UID(nt.pod.nodeName)}
			c.recorder.Event(node, corev1.EventTypeWarning, nt.reason, nt.msg)
		}
	}
}

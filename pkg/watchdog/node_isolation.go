package watchdog

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// mpsNode reports whether the node is labelled gpushare.io/isolation=mps, reading the node
// from the API server when the last read is Resync old or more (and so at the first sample):
// a relabelled node counts within Resync, at one GET per Resync rather than per Interval.
// A failed read keeps the last answer (none yet: not mps), is logged once per failure streak
// and tried again at the next sample; an invalid label value is not mps (Allocate refuses the
// node's GPU containers then, so none runs with MPS settings).
func (w *Watchdog) mpsNode(ctx context.Context, now time.Time) bool {
	if w.isolationReadAt.IsZero() || now.Sub(w.isolationReadAt) >= w.cfg.Resync {
		node, err := w.cfg.Client.CoreV1().Nodes().Get(ctx, w.cfg.NodeName, metav1.GetOptions{})
		if err != nil && !w.isolationFailing {
			klog.ErrorS(err, "Reading the node's isolation label failed; will retry", "node", w.cfg.NodeName, "label", gpushare.LabelIsolation)
		}
		w.isolationFailing = err != nil
		if err == nil {
			w.noteIsolation(node, now)
		}
	}
	return w.isolation == gpushare.IsolationMPS
}

// noteIsolation takes the node's isolation label from node, read at now (nil: nothing).
func (w *Watchdog) noteIsolation(node *corev1.Node, now time.Time) {
	if node == nil {
		return
	}
	iso, err := gpushare.NodeIsolation(node.Labels)
	if err != nil {
		iso = gpushare.IsolationNone
		if !w.isolationInvalid {
			klog.ErrorS(err, "The node's isolation label is invalid; MPS escapes are not checked", "node", w.cfg.NodeName)
		}
	}
	w.isolationInvalid = err != nil
	if iso != w.isolation && !w.isolationReadAt.IsZero() {
		klog.InfoS("The node's isolation changed", "node", w.cfg.NodeName, "from", w.isolation, "to", iso)
	}
	w.isolation, w.isolationReadAt = iso, now
}

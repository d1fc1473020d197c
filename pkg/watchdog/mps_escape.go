package watchdog

import (
	"context"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/gpushare"
	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

// The reason label of gpushare_mps_escapes_total: whose process bypassed MPS.
const (
	escapePod     = originPod     // a pod's, outside Unclaimed.ExemptNamespaces: event and action
	escapeHost    = originHost    // a process of no pod: log and counter only
	escapeUnknown = originUnknown // a process the watchdog cannot place: log and counter only
	escapeExempt  = "exempt"      // a pod's in Unclaimed.ExemptNamespaces: log and counter only
)

// escapeKey is one escape: a container of a pod on a card, or a process of no pod on a card.
type escapeKey struct {
	pod       types.UID // "" for a process of no pod
	container string
	pid       uint32 // 0 for a pod's processes: one escape per container and card
	card      int    // NVML index
}

// escape is what bypasses MPS on one card in a sample: the processes of one container of a
// pod, or one process of no pod.
type escape struct {
	pod       *corev1.Pod // nil unless reason is escapePod or escapeExempt
	container string      // "" when the pod's status does not name it yet
	pid       uint32      // its first process, in PID order
	card      gpushare.Device
	reason    string
	named     bool   // the process bears the MPS server's name
	used      uint64 // bytes: the sum of its processes' known use
	unknown   bool   // NVML could not tell the use of some of its processes
}

// checkMPS puts process pr of card, which runs in pod's container name (origin: attribute's),
// in the sample's escapes unless it is an MPS client or the node's MPS server. A process
// bearing the server's name is the server only outside the pods of tenants (deploy/mps runs
// it in kube-system, one of Unclaimed.ExemptNamespaces, or it runs on the host): a tenant
// names its own processes as it likes. A card on which NVML does not tell MPS clients apart
// is not checked.
func (w *Watchdog) checkMPS(s *usageSample, card gpushare.Device, pr gpunvml.Process, pod *corev1.Pod, name, origin string) {
	tenant := origin == originPod && !w.exempt[pod.Namespace]
	switch {
	case pr.Kind == gpunvml.ProcessMPSClient:
		return
	case pr.Kind == gpunvml.ProcessKindUnknown:
		if !w.mpsBlind[card.Index] {
			w.mpsBlind[card.Index] = true
			klog.InfoS("NVML does not list the MPS clients of a card: processes that bypass MPS are not detected there", "index", card.Index, "card", card.UUID)
		}
		return
	case pr.Kind == gpunvml.ProcessMPSServer && !tenant:
		s.mpsServers[card.Index] += pr.UsedBytes
		return
	}
	key, reason := escapeKey{pid: pr.PID, card: card.Index}, origin
	if pod != nil {
		key = escapeKey{pod: pod.UID, container: name, card: card.Index}
		if !tenant {
			reason = escapeExempt
		}
	}
	e := s.escapes[key]
	if e == nil {
		e = &escape{pod: pod, container: name, pid: pr.PID, card: card, reason: reason}
		s.escapes[key] = e
	}
	e.named = e.named || pr.Kind == gpunvml.ProcessMPSServer
	e.used += pr.UsedBytes
	e.unknown = e.unknown || !pr.UsedKnown
}

// judgeEscapes reports each escape of the sample once, from the sample it appears in (a
// process outside MPS is a fact, not a fluctuation: no grace), and carries out the action on
// the pods of tenants until it succeeds. Escapes on cards NVML did not list this time are
// kept as they are; the others that left the sample are forgotten, so they are reported
// again should they come back.
func (w *Watchdog) judgeEscapes(ctx context.Context, s usageSample, evicted map[types.UID]bool) {
	action := w.cfg.OverGrant.mpsEscapeAction()
	for key, e := range s.escapes {
		if e.pod != nil && e.pod.DeletionTimestamp != nil {
			continue // a terminating pod is going anyway
		}
		ep := w.escapes[key]
		if ep == nil {
			ep = &episode{since: s.at, reported: true}
			w.escapes[key] = ep
			w.reportEscape(e, action)
		}
		if e.reason == escapePod && !ep.acted {
			ep.acted = w.actOnEscape(ctx, e, ep, action, evicted)
		}
	}
	for key := range w.escapes {
		if _, ok := s.escapes[key]; !ok && s.listed[key.card] {
			delete(w.escapes, key)
		}
	}
}

// reportEscape counts e and logs it; for a tenant's pod also the GPUMPSEscape event.
func (w *Watchdog) reportEscape(e *escape, action OverGrantAction) {
	ns := ""
	if e.pod != nil {
		ns = e.pod.Namespace
	}
	w.mpsEscapes.WithLabelValues(w.cfg.NodeName, ns, strconv.Itoa(e.card.Index), e.reason).Inc()
	if e.reason != escapePod {
		klog.InfoS("A process bypasses MPS on a card of an MPS node; reported, not acted on", "reason", e.reason, "pid", e.pid,
			"pod", klog.KObj(e.pod), "container", e.container, "card", e.card.UUID, "usedMiB", e.used>>20)
		return
	}
	container := strconv.Quote(e.container)
	if e.container == "" {
		container = "(not in the pod's status yet)"
	}
	named := ""
	if e.named {
		named = " (it bears the MPS server's name, " + gpunvml.MPSServerName + ", but runs in this pod)"
	}
	w.cfg.Recorder.Eventf(e.pod, corev1.EventTypeWarning, gpushare.EventGPUMPSEscape,
		"Process %d of container %s holds a context of its own on card %s%s, outside the card's MPS server (node labelled %s=%s): no MPS memory limit holds it, so it can allocate all the card's free memory; it uses %s%s",
		e.pid, container, e.card.UUID, named, gpushare.LabelIsolation, gpushare.IsolationMPS, usedString(e.used, e.unknown), escapeActionNote(action))
	klog.InfoS("A pod's process bypasses MPS", "pod", klog.KObj(e.pod), "container", e.container, "pid", e.pid, "card", e.card.UUID,
		"usedMiB", e.used>>20, "action", action)
}

func escapeActionNote(a OverGrantAction) string {
	switch a {
	case OverGrantAnnotate:
		return "; share-plugin records it in the pod annotation " + gpushare.AnnotationMPSEscape
	case OverGrantEvict:
		return "; share-plugin evicts the pod"
	}
	return ""
}

// actOnEscape carries out action for a tenant's escape and reports whether it is done.
func (w *Watchdog) actOnEscape(ctx context.Context, e *escape, ep *episode, action OverGrantAction, evicted map[types.UID]bool) bool {
	const why = "running a GPU process outside MPS"
	switch action {
	case OverGrantAnnotate:
		return w.annotatePod(ctx, e.pod, gpushare.AnnotationMPSEscape, gpushare.MPSEscape{Container: e.container, Card: e.card.UUID,
			PID: e.pid, Since: ep.since.UTC().Truncate(time.Second)}, why)
	case OverGrantEvict:
		return w.evictPod(ctx, e.pod, evicted, why, "container", e.container, "card", e.card.UUID, "pid", e.pid)
	}
	return true
}

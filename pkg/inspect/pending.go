package inspect

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// reasonFailedScheduling is the event reason kube-scheduler records for unschedulable pods
// (the extender's filter reasons are part of its message).
const reasonFailedScheduling = "FailedScheduling"

// pendingModel lists the pods waiting for gpu-mem: what `--pending` prints.
type pendingModel struct {
	Pending []pendingPod `json:"pending"`
}

// pendingPod is an unbound pod that requests gpu-mem.
type pendingPod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Requested int64  `json:"requested"` // gpu-mem units the pod needs on its node (effective request)
	Cards     int    `json:"cards"`     // most distinct cards one container needs
	// Reason is the message of the pod's latest FailedScheduling event, else the message of
	// its PodScheduled=False condition, else "".
	Reason string `json:"reason"`
	// LastSeen is when that event was last observed (absent without an event).
	LastSeen *time.Time `json:"lastSeen,omitempty"`
}

// buildPending picks from pods the unbound Pending pods that request res.Mem and attaches
// the latest FailedScheduling event of each (events of other pods or reasons are
// ignored). Pods are sorted by namespace and name. Pods whose gpu-mem request is malformed
// are listed with the problem as their reason.
func buildPending(pods []corev1.Pod, events []corev1.Event, res gpushare.Resources) pendingModel {
	latest := map[types.UID]*corev1.Event{}
	for i := range events {
		e := &events[i]
		if e.Reason != reasonFailedScheduling {
			continue
		}
		if old, ok := latest[e.InvolvedObject.UID]; !ok || eventTime(e).After(eventTime(old)) {
			latest[e.InvolvedObject.UID] = e
		}
	}
	m := pendingModel{Pending: []pendingPod{}}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName != "" || p.Status.Phase != corev1.PodPending {
			continue
		}
		req, err := res.PodRequest(p)
		pp := pendingPod{Namespace: p.Namespace, Name: p.Name}
		switch {
		case err != nil:
			pp.Reason = fmt.Sprintf("invalid gpu-mem request: %v", err)
			m.Pending = append(m.Pending, pp)
			continue
		case req.IsZero():
			continue
		}
		pp.Requested, pp.Cards = req.TotalUnits(), req.MaxCards()
		if e, ok := latest[p.UID]; ok {
			pp.Reason = oneLine(e.Message)
			t := eventTime(e)
			pp.LastSeen = &t
		} else {
			pp.Reason = oneLine(scheduledConditionMessage(p))
		}
		m.Pending = append(m.Pending, pp)
	}
	sort.Slice(m.Pending, func(i, j int) bool {
		if m.Pending[i].Namespace != m.Pending[j].Namespace {
			return m.Pending[i].Namespace < m.Pending[j].Namespace
		}
		return m.Pending[i].Name < m.Pending[j].Name
	})
	return m
}

// eventTime is when the event was last seen: core/v1 events written through the
// events.k8s.io API (as kube-scheduler does) fill Series/EventTime instead of LastTimestamp.
func eventTime(e *corev1.Event) time.Time {
	t := e.CreationTimestamp.Time
	for _, c := range []time.Time{e.EventTime.Time, e.LastTimestamp.Time} {
		if c.After(t) {
			t = c
		}
	}
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	return t.UTC()
}

func scheduledConditionMessage(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return c.Message
		}
	}
	return ""
}

// renderPending writes the pending pods as a table
//
//	NAMESPACE  NAME   GPU-MEM  CARDS  REASON
//	default    big-1  10       1      0/3 nodes are available: …
//
// or a one-line note when no pod waits for gpu-mem. A pod without any recorded reason shows
// "<none>". Errors are the writer's.
func renderPending(w io.Writer, m pendingModel) error {
	if len(m.Pending) == 0 {
		_, err := io.WriteString(w, "No pods are waiting for gpu-mem.\n")
		return err
	}
	rows := []string{"NAMESPACE\tNAME\tGPU-MEM\tCARDS\tREASON"}
	for _, p := range m.Pending {
		reason := p.Reason
		if reason == "" {
			reason = "<none>"
		}
		rows = append(rows, strings.Join([]string{p.Namespace, p.Name,
			fmt.Sprint(p.Requested), fmt.Sprint(p.Cards), reason}, "\t"))
	}
	_, err := w.Write(table(rows))
	return err
}

package inspect

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/probe"
)

// logReader reads one container's log. A seam: the fake clientset answers every log request
// with the same fixed text.
type logReader func(ctx context.Context, ns, pod, container string) (string, error)

// logTailLines is how much of a probe container's log is read: it prints two lines.
const logTailLines = 20

// apiLogs reads logs through the API server (kubelet's /containerLogs).
func apiLogs(cs kubernetes.Interface) logReader {
	return func(ctx context.Context, ns, pod, container string) (string, error) {
		// The result is the last line the probe prints; the tail bounds what travels.
		tail := int64(logTailLines)
		b, err := cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, TailLines: &tail}).DoRaw(ctx)
		return string(b), err
	}
}

// wait polls the run's pods until each has finished (Succeeded or Failed: the probe exits
// 1 or 2 for verdicts other than enforced) or r.Timeout passes, and returns the last state of
// each by name (absent: never seen). Errors: a LIST that fails, or ctx ended (Ctrl-C).
func (r verifyRun) wait(ctx context.Context, created map[string]probeTarget) (map[string]*corev1.Pod, error) {
	pods := map[string]*corev1.Pod{}
	sel := metav1.ListOptions{LabelSelector: gpushare.LabelVerifyRun + "=" + r.ID}
	err := wait.PollUntilContextTimeout(ctx, r.Interval, r.Timeout, true, func(ctx context.Context) (bool, error) {
		l, err := r.Client.Client.CoreV1().Pods(r.Namespace).List(ctx, sel)
		if err != nil {
			return false, fmt.Errorf("listing the probe pods: %w", err)
		}
		for i := range l.Items {
			if _, ok := created[l.Items[i].Name]; ok {
				pods[l.Items[i].Name] = &l.Items[i]
			}
		}
		for name := range created {
			if p := pods[name]; p == nil || !finished(p) {
				return false, nil
			}
		}
		return true, nil
	})
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("waiting for the probe pods: %w", ctx.Err())
	case err != nil && !wait.Interrupted(err):
		return nil, err
	}
	return pods, nil
}

func finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// row reads both containers' results from the logs of t's pod p (nil: never seen) into the
// node's row; a pod that did not finish in time says why (the scheduler's reason, a waiting
// container's reason).
func (r verifyRun) row(ctx context.Context, t probeTarget, p *corev1.Pod) verifyRow {
	row := verifyRow{Node: t.Node, Isolation: isolationColumn(t)}
	switch {
	case p == nil:
		return row.cannot("the probe pod was not found")
	case !finished(p):
		return row.cannot(fmt.Sprintf("the probe pod did not finish within %s: %s", r.Timeout, notFinishedReason(p)))
	}
	for _, c := range []string{containerGranted, containerSibling} {
		log, err := r.Client.Logs(ctx, r.Namespace, p.Name, c)
		if err != nil {
			row.Notes = append(row.Notes, fmt.Sprintf("%s: reading the log: %v", c, err))
			continue
		}
		res, err := probe.ParseResult(log)
		if err != nil {
			row.Notes = append(row.Notes, fmt.Sprintf("%s: %v: %s", c, err, lastLine(log)))
			continue
		}
		if c == containerGranted {
			row.Granted = &res
		} else {
			row.Sibling = &res
		}
	}
	return row.fill()
}

// notFinishedReason is why p has not finished: not scheduled (the scheduler's message), a
// container waiting (its reason and message), or its phase.
func notFinishedReason(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return "not scheduled: " + oneLine(c.Message)
		}
	}
	for _, s := range p.Status.ContainerStatuses {
		if w := s.State.Waiting; w != nil && w.Reason != "" {
			return fmt.Sprintf("container %s waiting: %s %s", s.Name, w.Reason, oneLine(w.Message))
		}
	}
	if p.Status.Phase == "" {
		return "no status yet"
	}
	return "phase " + string(p.Status.Phase)
}

// lastLine is the last non-empty line of a log, for a message (the probe's error when it
// printed no result).
func lastLine(log string) string {
	lines := strings.Split(strings.TrimSpace(log), "\n")
	if l := strings.TrimSpace(lines[len(lines)-1]); l != "" {
		return l
	}
	return "(empty log)"
}

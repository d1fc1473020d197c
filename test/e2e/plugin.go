//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// PluginSchedulerName is the profile of deploy/gpushare-scheduler/scheduler-config.yaml,
// which the local cluster runs next to kube-scheduler.
const PluginSchedulerName = "gpushare-scheduler"

// scheduledBy sets the pod's schedulerName to sched ("": leaves it to the default).
func scheduledBy(sched string, p *corev1.Pod) *corev1.Pod {
	if sched != "" {
		p.Spec.SchedulerName = sched
	}
	return p
}

// CasePluginPreemption: a priority-1000 pod that fits only on the one card a priority-0 pod
// holds evicts it through gpushare-scheduler's preemption (the plugin's dry run frees the
// victim's card) and runs on that card.
func CasePluginPreemption(t *testing.T, e *Env) {
	requireBinary(t, e, "gpushare-scheduler")
	ns := newNamespace(t, e)
	ctx := testContext(t, 3*time.Minute)
	high := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "e2e-gpushare-high-" + rand.String(4)}, Value: 1000}
	if _, err := e.Client.SchedulingV1().PriorityClasses().Create(ctx, high, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PriorityClass %s: %v", high.Name, err)
	}
	t.Cleanup(func() {
		_ = e.Client.SchedulingV1().PriorityClasses().Delete(context.Background(), high.Name, metav1.DeleteOptions{})
	})
	node := newKwokNode(t, e, "preempt", t4) // one card of 14 units

	createPod(t, e, scheduledBy(PluginSchedulerName, gpuPod(ns, "low", node, ctr{units: 10})))
	low := waitPod(t, e, ns, "low", time.Minute, "Running", isRunning)

	pod := scheduledBy(PluginSchedulerName, gpuPod(ns, "high", node, ctr{units: 10}))
	pod.Spec.PriorityClassName = high.Name
	createPod(t, e, pod)
	got := waitPod(t, e, ns, "high", 2*time.Minute, "Running on the victim's card", isRunning)
	if got.Spec.NodeName != node {
		t.Fatalf("high runs on %s, want %s", got.Spec.NodeName, node)
	}
	alloc, ok, err := res.ReadAllocation(got)
	if err != nil || !ok || cardsOf(alloc.CardUsage(got)) != cardsOf(gpushare.CardUnits{0: 10}) {
		t.Fatalf("high's allocation %v (ok %v, err %v), want 10 units on card 0", alloc, ok, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := e.Client.CoreV1().Pods(ns).Get(ctx, "low", metav1.GetOptions{})
		return apierrors.IsNotFound(err) || (err == nil && p.UID != low.UID), nil
	})
	if err != nil {
		t.Fatalf("low was not evicted: %v", err)
	}
	if ev := podEvents(e, ns, "low"); !strings.Contains(ev, "Preempted") {
		t.Logf("low's events (no Preempted event seen yet): %s", ev)
	}
}

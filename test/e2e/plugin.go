//go:build e2e

package e2e

import (
	"context"
	"fmt"
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

// CasePluginNarrowFallback: gpushare-scheduler narrows a gpu-mem pod to the 32 nodes its
// policy rates best. When every one of them refuses it for a reason GPUShare does not read
// (here the required anti-affinity of a pod already there), GPUShare's PostFilter has it
// retried at once over every node, and it runs on the one node left within seconds, not after
// the unschedulable queue's five minutes.
func CasePluginNarrowFallback(t *testing.T, e *Env) {
	requireBinary(t, e, "gpushare-scheduler")
	ns := newNamespace(t, e)
	const blocked = 34 // more than the 32 nodes narrowing keeps
	var nodes []string
	for range blocked + 1 {
		nodes = append(nodes, newKwokNode(t, e, "narrow", t4)) // one card of 14 units each
	}
	free := nodes[blocked]
	victimLabels := map[string]string{"e2e-narrow": "victim"}
	// 10 of 14 units taken: a 4-unit pod fills such a card exactly, which fgd and binpack both
	// rate above the empty card of free.
	for i, n := range nodes[:blocked] {
		p := scheduledBy(PluginSchedulerName, gpuPod(ns, fmt.Sprintf("blocker-%d", i), n, ctr{units: 10}))
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: victimLabels},
				TopologyKey:   corev1.LabelHostname,
			}},
		}}
		createPod(t, e, p)
	}
	for i := range blocked {
		waitPod(t, e, ns, fmt.Sprintf("blocker-%d", i), 2*time.Minute, "Running", isRunning)
	}

	victim := scheduledBy(PluginSchedulerName, gpuPod(ns, "victim", free, ctr{units: 4}))
	victim.Labels = victimLabels
	victim.Spec.NodeSelector = nil
	victim.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: nodes}},
		}}},
	}}
	start := time.Now()
	createPod(t, e, victim)
	got := waitPod(t, e, ns, "victim", 45*time.Second, "Running on the node the narrowed set left out", isRunning)
	if got.Spec.NodeName != free {
		t.Fatalf("victim runs on %s, want %s (every other node holds a pod that refuses it)", got.Spec.NodeName, free)
	}
	t.Logf("victim bound to the node left out after %v", time.Since(start).Round(100*time.Millisecond))
	// The first attempt was narrowed: its event names GPUShare as what left the other nodes out.
	if ev := podEvents(e, ns, "victim"); !strings.Contains(ev, "didn't satisfy plugin(s) [GPUShare]") && !strings.Contains(ev, "retrying on every node") {
		t.Errorf("victim's events do not show a narrowed first attempt:\n%s", ev)
	}
}

package schedulerplugin

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/gpushare"
)

func TestEventsToRegisterNamesNoWildcard(t *testing.T) {
	f := start(t, nil, ct.Node("n1", 16))
	events, err := f.pl.EventsToRegister(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[fwk.EventResource]fwk.ActionType{
		fwk.AssignedPod: fwk.Delete | fwk.Update,
		fwk.Node:        fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeLabel | fwk.UpdateNodeAnnotation,
		fwk.TargetPod:   fwk.Update,
	}
	got := map[fwk.EventResource]fwk.ActionType{}
	for _, e := range events {
		if e.Event.Resource == fwk.WildCard {
			t.Fatalf("wildcard event registered: %+v", e.Event)
		}
		if e.QueueingHintFn == nil {
			t.Errorf("%s/%s has no queueing hint", e.Event.Resource, e.Event.ActionType)
		}
		got[e.Event.Resource] |= e.Event.ActionType
	}
	for r, a := range want {
		if got[r] != a {
			t.Errorf("%s: registered %v, want %v", r, got[r], a)
		}
	}
	if len(got) != len(want) {
		t.Errorf("registered resources %v, want %v", got, want)
	}
}

func TestQueueingHints(t *testing.T) {
	f := start(t, nil, ct.Node("n1", 16))
	pending := ct.Pod("pending", 8)
	gpuPod := ct.Placed(ct.Pod("gpu", 8), "n1", gpushare.CardUnits{0: 8})
	cpuPod := ct.Pod("cpu", 0)
	cpuPod.Spec.NodeName = "n1"

	recorded := gpuPod.DeepCopy()
	recorded.Annotations[gpushare.AnnotationAllocation] = `{"0":{"0":4}}`
	statusOnly := gpuPod.DeepCopy()
	statusOnly.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	succeeded := gpuPod.DeepCopy()
	succeeded.Status.Phase = v1.PodSucceeded

	node := ct.Node("n2", 16)
	heartbeat := node.DeepCopy()
	heartbeat.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	heartbeat.Annotations["node.alpha.kubernetes.io/ttl"] = "0"
	grown := ct.Node("n2", 16, 16)
	isolated := node.DeepCopy()
	isolated.Labels[gpushare.LabelIsolation] = string(gpushare.IsolationMPS)
	unselected := ct.BareNode("n3")
	delete(unselected.Labels, gpushare.NodeLabelKey)
	joined := ct.Node("n3", 16)

	allocOnly := ct.AllocatableNode("n4", 16, 1)
	allocGrown := ct.AllocatableNode("n4", 32, 2)

	annotated := pending.DeepCopy()
	annotated.Annotations = map[string]string{"example.com/note": "x"}

	for _, tc := range []struct {
		name     string
		hint     fwk.QueueingHintFn
		old, new any
		want     fwk.QueueingHint
	}{
		{"gpu-mem pod deleted", f.pl.hintPodDeleted, gpuPod, nil, fwk.Queue},
		{"pod without gpu-mem deleted", f.pl.hintPodDeleted, cpuPod, nil, fwk.QueueSkip},
		{"unknown object deleted", f.pl.hintPodDeleted, "?", nil, fwk.Queue},
		{"allocation record changed", f.pl.hintPodRecordChanged, gpuPod, recorded, fwk.Queue},
		{"gpu-mem pod finished", f.pl.hintPodRecordChanged, gpuPod, succeeded, fwk.Queue},
		{"gpu-mem pod's status conditions", f.pl.hintPodRecordChanged, gpuPod, statusOnly, fwk.QueueSkip},
		{"pod without gpu-mem updated", f.pl.hintPodRecordChanged, cpuPod, cpuPod.DeepCopy(), fwk.QueueSkip},
		{"gpushare node added", f.pl.hintNodeChanged, nil, node, fwk.Queue},
		{"node outside the selector added", f.pl.hintNodeChanged, nil, unselected, fwk.QueueSkip},
		{"node heartbeat and unrelated annotation", f.pl.hintNodeChanged, node, heartbeat, fwk.QueueSkip},
		{"inventory grew", f.pl.hintNodeChanged, node, grown, fwk.Queue},
		{"isolation mode changed", f.pl.hintNodeChanged, node, isolated, fwk.Queue},
		{"allocatable gpu-mem grew (no inventory annotation)", f.pl.hintNodeChanged, allocOnly, allocGrown, fwk.Queue},
		{"allocatable-only node's heartbeat", f.pl.hintNodeChanged, allocOnly, allocOnly.DeepCopy(), fwk.QueueSkip},
		{"node joined the selector", f.pl.hintNodeChanged, unselected, joined, fwk.Queue},
		{"node left the selector", f.pl.hintNodeChanged, joined, unselected, fwk.QueueSkip},
		{"pending pod annotated", hintOwnAnnotations, pending, annotated, fwk.Queue},
		{"pending pod's status only", hintOwnAnnotations, pending, pending.DeepCopy(), fwk.QueueSkip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.hint(klog.Background(), pending, tc.old, tc.new)
			if err != nil || got != tc.want {
				t.Fatalf("hint = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// TestDeleteHintWaitsForTheLedger: the queue must not retry pods against a ledger that
// still counts the deleted pod (the scheduler's handler and the ledger's hear the deletion
// on different goroutines).
func TestDeleteHintWaitsForTheLedger(t *testing.T) {
	gpuPod := ct.Placed(ct.Pod("gpu", 16), "n1", gpushare.CardUnits{0: 16})
	f := start(t, nil, ct.Node("n1", 16), gpuPod)
	ct.Eventually(t, "placed pod counted", func() bool { return f.cards("n1") == "0:16/16" })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if f.pl.cache.AwaitUncounted(ctx, gpuPod.UID) {
		t.Fatal("AwaitUncounted reported a counted pod uncounted")
	}

	if err := f.client.CoreV1().Pods("default").Delete(context.Background(), "gpu", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if hint, err := f.pl.hintPodDeleted(klog.Background(), ct.Pod("pending", 8), gpuPod, nil); err != nil || hint != fwk.Queue {
		t.Fatalf("hint = %v, %v; want Queue", hint, err)
	}
	if got := f.cards("n1"); got != "0:0/16" {
		t.Fatalf("after the hint returned the ledger reads %s, want 0:0/16", got)
	}
}

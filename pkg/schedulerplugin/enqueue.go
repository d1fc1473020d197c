package schedulerplugin

import (
	"context"
	"maps"
	"reflect"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// ledgerCatchUp bounds how long the queueing hint of a deleted pod waits for the ledger
// to stop counting it. The ledger and the scheduling queue hear the same informer event on
// different goroutines; without the wait a pod moved by the deletion could be filtered
// against the ledger as it was before, fail again and wait for the next event. The ledger
// normally catches up in microseconds; the bound only matters when the event is not a real
// deletion (an assumed pod the scheduler forgets while it still exists).
const ledgerCatchUp = 100 * time.Millisecond

var _ fwk.EnqueueExtensions = (*Plugin)(nil)

// EventsToRegister implements fwk.EnqueueExtensions: the cluster events after which a pod
// GPUShare rejected may fit, each with a queueing hint that skips the events that cannot
// free or add gpu-mem. Registered:
//   - AssignedPod Delete: a pod holding gpu-mem ended (deleted, or Succeeded/Failed, which
//     the scheduler's informer drops) or an assumed pod was forgotten;
//   - AssignedPod Update: a gpu-mem pod's allocation record changed (a self-placed pod
//     recorded its card and stops counting on every card);
//   - Node Add, and Node updates of allocatable, labels or annotations: a gpushare node
//     appeared, or its inventory, isolation mode or selection changed;
//   - TargetPod Update: the pending pod's own annotations changed.
//
// Nothing else (pods without gpu-mem coming and going, node heartbeats, taints) requeues a
// pod GPUShare rejected.
func (p *Plugin) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, QueueingHintFn: p.hintPodDeleted},
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Update}, QueueingHintFn: p.hintPodRecordChanged},
		{
			Event:          fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeLabel | fwk.UpdateNodeAnnotation},
			QueueingHintFn: p.hintNodeChanged,
		},
		{Event: fwk.ClusterEvent{Resource: fwk.TargetPod, ActionType: fwk.Update}, QueueingHintFn: hintOwnAnnotations},
	}, nil
}

// holdsGPUMem reports whether pod asks for gpu-mem; an unreadable request counts as yes, so
// an odd pod never keeps another one waiting.
func (p *Plugin) holdsGPUMem(pod *v1.Pod) bool {
	req, err := p.res.PodRequest(pod)
	return err != nil || !req.IsZero()
}

// awaitLedger waits (at most ledgerCatchUp) for the ledger to stop counting the deleted
// pod gone, so that the pods the hint queues are filtered against the ledger after the
// deletion. The scheduler calls the hint once per rejected pod for one event: only the first
// call for a pod waits (lastAwaited), so an event that is not a real deletion delays the
// scheduler's event handling by ledgerCatchUp once, not once per pending pod.
func (p *Plugin) awaitLedger(logger klog.Logger, gone *v1.Pod) {
	uid := gone.UID
	if prev := p.lastAwaited.Swap(&uid); prev != nil && *prev == uid {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), ledgerCatchUp)
	defer cancel()
	if !p.cache.AwaitUncounted(ctx, gone.UID) {
		logger.V(4).Info("GPUShare ledger still counts a pod the scheduler saw deleted", "pod", klog.KObj(gone))
	}
}

// hintPodDeleted queues when the pod that went away held (or may have held) gpu-mem, once
// the ledger no longer counts it.
func (p *Plugin) hintPodDeleted(logger klog.Logger, pod *v1.Pod, oldObj, _ any) (fwk.QueueingHint, error) {
	gone, ok := oldObj.(*v1.Pod)
	if !ok {
		return fwk.Queue, nil // unknown object: never leave a pod waiting on a guess
	}
	if !p.holdsGPUMem(gone) {
		return fwk.QueueSkip, nil
	}
	p.awaitLedger(logger, gone)
	logger.V(5).Info("gpu-mem pod deleted: retrying", "pod", klog.KObj(pod), "deleted", klog.KObj(gone))
	return fwk.Queue, nil
}

// hintPodRecordChanged queues when a bound gpu-mem pod's allocation record annotations or
// phase changed: what the ledger counts for it may have shrunk.
func (p *Plugin) hintPodRecordChanged(_ klog.Logger, _ *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	before, ok1 := oldObj.(*v1.Pod)
	after, ok2 := newObj.(*v1.Pod)
	if !ok1 || !ok2 {
		return fwk.Queue, nil
	}
	if !p.holdsGPUMem(after) {
		return fwk.QueueSkip, nil
	}
	if before.Status.Phase != after.Status.Phase {
		return fwk.Queue, nil
	}
	for _, k := range gpushare.BindAnnotationKeys() {
		if before.Annotations[k] != after.Annotations[k] {
			return fwk.Queue, nil
		}
	}
	return fwk.QueueSkip, nil
}

// hintNodeChanged queues when a node the plugin accounts was added, or its card inventory,
// isolation mode or membership of the plugin's node selector changed.
func (p *Plugin) hintNodeChanged(_ klog.Logger, _ *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	after, ok := newObj.(*v1.Node)
	if !ok {
		return fwk.Queue, nil
	}
	if oldObj == nil {
		if p.accounts(after) {
			return fwk.Queue, nil
		}
		return fwk.QueueSkip, nil
	}
	before, ok := oldObj.(*v1.Node)
	if !ok {
		return fwk.Queue, nil
	}
	if !p.accounts(after) {
		return fwk.QueueSkip, nil // leaving the selection frees nothing
	}
	if !p.accounts(before) || before.Labels[gpushare.LabelIsolation] != after.Labels[gpushare.LabelIsolation] {
		return fwk.Queue, nil
	}
	if !p.inventoryInputsChanged(before, after) {
		return fwk.QueueSkip, nil // the common case: nothing the inventory is read from changed
	}
	invBefore, srcBefore, errBefore := p.res.NodeInventory(before)
	invAfter, srcAfter, errAfter := p.res.NodeInventory(after)
	if srcBefore != srcAfter || (errBefore == nil) != (errAfter == nil) || !reflect.DeepEqual(invBefore, invAfter) {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// inventoryInputsChanged reports whether anything gpushare.Resources.NodeInventory reads
// differs between the two node objects: the inventory annotation, allocatable gpu-mem and
// gpu-count. The hint runs once per pending pod for every such node update, so the cheap
// comparison comes before parsing the inventories.
func (p *Plugin) inventoryInputsChanged(before, after *v1.Node) bool {
	if before.Annotations[gpushare.AnnotationNodeInventory] != after.Annotations[gpushare.AnnotationNodeInventory] {
		return true
	}
	for _, r := range []v1.ResourceName{p.res.Mem, p.res.Count} {
		b, okB := before.Status.Allocatable[r]
		a, okA := after.Status.Allocatable[r]
		if okB != okA || b.Cmp(a) != 0 {
			return true
		}
	}
	return false
}

// accounts reports whether the plugin's node selector takes node.
func (p *Plugin) accounts(node *v1.Node) bool {
	return p.nodeSelector.Matches(labels.Set(node.Labels))
}

// hintOwnAnnotations queues when the pending pod's own annotations changed (its card choice
// and placement are read from them); its gpu-mem request cannot change while it is pending.
func hintOwnAnnotations(_ klog.Logger, _ *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	before, ok1 := oldObj.(*v1.Pod)
	after, ok2 := newObj.(*v1.Pod)
	if !ok1 || !ok2 || !maps.Equal(before.Annotations, after.Annotations) {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

package deviceplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// eventAllocationRestored (Warning): a served pod's allocation record no longer named the
// cards its containers run on; the plugin wrote them back.
const eventAllocationRestored = "GPUShareAllocationRestored"

// restoreEvery is how often served pods' allocation records are compared with what was
// served.
const restoreEvery = 5 * time.Second

// keepAllocationRecordsTrue writes back, every restoreEvery, the allocation record of each pod whose
// every gpu-mem container this plugin served, when the record says anything else: its
// tenant can edit it, and the extender's ledger and `kubectl inspect gpushare` read it.
func (p *Plugin) keepAllocationRecordsTrue(ctx context.Context) {
	t := p.node.Clock().NewTicker(restoreEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			p.restoreAllocationRecords(ctx, p.podsOnNode())
		}
	}
}

// restoreAllocationRecords restores the allocation records of pods among pods that drifted
// from what was served (drifted), logging failures: the next round tries again.
func (p *Plugin) restoreAllocationRecords(ctx context.Context, pods []*corev1.Pod) {
	grants := p.ledger.snapshot()
	for _, pod := range pods {
		truth, ok := p.drifted(pod, grants)
		if !ok {
			continue
		}
		found := pod.Annotations[gpushare.AnnotationAllocation]
		if err := p.writeAllocationRecord(ctx, pod, truth); err != nil {
			klog.ErrorS(err, "Restoring a pod's allocation record failed; will retry", "pod", klog.KObj(pod))
			continue
		}
		klog.InfoS("Restored the allocation record of a served pod", "pod", klog.KObj(pod), "found", found)
		p.node.Recorder().Eventf(pod, corev1.EventTypeWarning, eventAllocationRestored,
			"allocation record %s=%q does not name the cards its containers run on; restored to %s",
			gpushare.AnnotationAllocation, clip(found), usageString(truth.CardUsage(pod)))
	}
}

// drifted returns what the pod's allocation record must say when this plugin served
// (grants) every gpu-mem container of the live pod and the record says something else.
func (p *Plugin) drifted(pod *corev1.Pod, grants snapshot) (gpushare.PodAllocation, bool) {
	if !holdsMemory(pod, p.node.Name()) {
		return gpushare.PodAllocation{}, false
	}
	req, err := p.cfg.Resources.PodRequest(pod)
	if err != nil || req.IsZero() {
		return gpushare.PodAllocation{}, false
	}
	served := grants.served(pod.UID)
	for _, c := range req.Containers {
		if !served[c.Ref] {
			return gpushare.PodAllocation{}, false
		}
	}
	truth := grants.granted(pod.UID)
	if req.ValidateAllocationOn(truth, p.cards.Has) != nil {
		return gpushare.PodAllocation{}, false
	}
	got, ok, err := p.cfg.Resources.ReadAllocation(pod)
	if err == nil && ok && sameAllocation(got, truth) && gpushare.CheckRecordUnit(pod, p.node.Unit()) == nil {
		return gpushare.PodAllocation{}, false
	}
	return truth, true
}

// sameAllocation compares two allocations, an empty map equal to none.
func sameAllocation(a, b gpushare.PodAllocation) bool {
	norm := func(al gpushare.Allocation) gpushare.Allocation {
		out := gpushare.Allocation{}
		for i, cu := range al {
			if len(cu) > 0 {
				out[i] = cu
			}
		}
		return out
	}
	return reflect.DeepEqual(norm(a.App), norm(b.App)) && reflect.DeepEqual(norm(a.Init), norm(b.Init))
}

// writeAllocationRecord sets the pod's allocation annotations (per container, the single-card IDX and
// DEV when it holds one card, the unit they count in) to truth, leaving the progress and assume-time annotations as
// they are, under the pod's UID precondition.
func (p *Plugin) writeAllocationRecord(ctx context.Context, pod *corev1.Pod, truth gpushare.PodAllocation) error {
	bind := gpushare.BindAnnotations(truth, 0, p.cardUnits(), p.node.Unit(), time.Time{})
	ann := map[string]*string{}
	for _, k := range []string{gpushare.AnnotationAllocation, gpushare.AnnotationInitAllocation,
		gpushare.AnnotationIndex, gpushare.AnnotationDevUnits, gpushare.AnnotationUnit} {
		if v, ok := bind[k]; ok {
			ann[k] = &v
		} else {
			ann[k] = nil
		}
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": pod.UID, "annotations": ann}})
	if err != nil {
		return err
	}
	if _, err := p.node.Client().CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patching the allocation record of pod %s: %w", klog.KObj(pod), err)
	}
	return nil
}

// clip bounds a tenant-written value quoted in an event.
func clip(s string) string {
	if len(s) > 128 {
		return s[:128] + "…"
	}
	return s
}

// adoptServedPods fills the ledger, after a restart, with the pods whose annotations say
// this plugin served them (gpushare.io/allocated-containers, or ASSIGNED=true for all
// containers) and whose allocation record is valid, so /served and the ledger cover them
// again. It returns how many pods it adopted.
func (p *Plugin) adoptServedPods(pods []*corev1.Pod) int {
	n := 0
	for _, pod := range pods {
		if !holdsMemory(pod, p.node.Name()) {
			continue
		}
		req, alloc, err := p.validAllocation(pod)
		if err != nil {
			continue
		}
		done, err := gpushare.ParseAllocated(pod.Annotations[gpushare.AnnotationAllocated])
		if err != nil {
			continue
		}
		var refs []gpushare.ContainerRef
		for _, c := range req.Containers {
			if done[c.Ref] || pod.Annotations[gpushare.AnnotationAssigned] == "true" {
				refs = append(refs, c.Ref)
			}
		}
		if len(refs) > 0 {
			// The pod came from the pod view: seen.
			p.ledger.grantContainers(pod, alloc, true, refs...)
			n++
		}
	}
	return n
}

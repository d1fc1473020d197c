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

// EventAllocationRestored (Warning): a served pod's allocation record no longer named the
// cards its containers run on; the plugin wrote them back.
const EventAllocationRestored = "GPUShareAllocationRestored"

// restoreEvery is how often served pods' records are compared with what was served.
const restoreEvery = 5 * time.Second

// keepRecordsTrue writes back, every restoreEvery, the allocation record of each pod whose
// every gpu-mem container this plugin served, when the record says anything else: its
// tenant can edit it, and the extender's ledger and `kubectl inspect gpushare` read it.
func (p *Plugin) keepRecordsTrue(ctx context.Context) {
	t := p.cfg.Clock.NewTicker(restoreEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			p.restoreRecords(ctx, p.podsOnNode())
		}
	}
}

// restoreRecords restores the records of pods among pods that drifted from what was served
// (drifted), logging failures: the next round tries again.
func (p *Plugin) restoreRecords(ctx context.Context, pods []*corev1.Pod) {
	for _, pod := range pods {
		truth, ok := p.drifted(pod)
		if !ok {
			continue
		}
		found := pod.Annotations[gpushare.AnnotationAllocation]
		if err := p.writeRecord(ctx, pod, truth); err != nil {
			klog.ErrorS(err, "Restoring a pod's allocation record failed; will retry", "pod", klog.KObj(pod))
			continue
		}
		klog.InfoS("Restored the allocation record of a served pod", "pod", klog.KObj(pod), "found", found)
		p.cfg.Recorder.Eventf(pod, corev1.EventTypeWarning, EventAllocationRestored,
			"allocation record %s=%q does not name the cards its containers run on; restored to %s",
			gpushare.AnnotationAllocation, clip(found), usageString(truth.CardUsage(pod)))
	}
}

// drifted returns what the pod's record must say when this plugin served every gpu-mem
// container of the live pod and its record says something else.
func (p *Plugin) drifted(pod *corev1.Pod) (gpushare.PodAllocation, bool) {
	if !livePod(pod, p.cfg.NodeName) {
		return gpushare.PodAllocation{}, false
	}
	req, err := p.cfg.Resources.PodRequest(pod)
	if err != nil || req.IsZero() {
		return gpushare.PodAllocation{}, false
	}
	served := p.servedOf(pod.UID)
	for _, c := range req.Containers {
		if !served[c.Ref] {
			return gpushare.PodAllocation{}, false
		}
	}
	truth := p.recordedClaim(pod.UID)
	if req.ValidateAllocationOn(truth, p.cards.has) != nil {
		return gpushare.PodAllocation{}, false
	}
	got, ok, err := p.cfg.Resources.ReadAllocation(pod)
	if err == nil && ok && sameAllocation(got, truth) {
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

// writeRecord sets the pod's allocation annotations (per container, the single-card IDX and
// DEV when it holds one card) to truth, leaving the progress and assume-time annotations as
// they are, under the pod's UID precondition.
func (p *Plugin) writeRecord(ctx context.Context, pod *corev1.Pod, truth gpushare.PodAllocation) error {
	bind := gpushare.BindAnnotations(truth, 0, p.cardUnits(), time.Time{})
	ann := map[string]*string{}
	for _, k := range []string{gpushare.AnnotationAllocation, gpushare.AnnotationInitAllocation,
		gpushare.AnnotationIndex, gpushare.AnnotationDevUnits} {
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
	if _, err := p.cfg.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
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

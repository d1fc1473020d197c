package deviceplugin

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// podRecord is what this process handed to one pod: the truth for the ledger while the pod
// lives, whatever its annotations say later or whether the informer has caught up.
type podRecord struct {
	pod *corev1.Pod // last seen object (names, UID, which init containers are sidecars)
	// claim is the cards of every container this plugin served and, for a pod it placed
	// itself, of every gpu-mem container (the rest are a claim until kubelet allocates them).
	claim  gpushare.PodAllocation
	served map[gpushare.ContainerRef]bool
	// refused is set when Allocate refused one of the pod's containers: kubelet then fails
	// the pod's admission for good, so the pod holds nothing whatever its annotations say.
	refused bool
	seen    bool      // the pod view has shown the pod since it was recorded
	at      time.Time // last served or refused
}

// records is the plugin's ledger of served pods by UID.
type records map[types.UID]*podRecord

// livePod reports a pod on node whose containers may hold GPU memory: bound there, not
// terminating, not finished.
func livePod(pod *corev1.Pod, node string) bool {
	return pod.Spec.NodeName == node && pod.DeletionTimestamp == nil &&
		pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// forgetAfter is how long a record of a pod the pod view has never shown is kept: long
// enough to outlast informer lag (a pod found by the LIST fallback may not be in the
// informer yet), short enough not to keep pods deleted before the informer saw them.
const forgetAfter = 10 * time.Minute

// keep reports whether the record's pod still lives, given the node's pods by UID.
func (r *podRecord) keep(byUID map[types.UID]*corev1.Pod, node string, now time.Time) bool {
	if pod, ok := byUID[r.pod.UID]; ok {
		return livePod(pod, node)
	}
	return !r.seen && now.Sub(r.at) <= forgetAfter
}

// syncRecords drops the records of pods that are gone or terminal and refreshes the rest
// from pods (the node's pods).
func (p *Plugin) syncRecords(pods []*corev1.Pod) {
	byUID := podsByUID(pods)
	now := p.cfg.Clock.Now()
	p.recMu.Lock()
	defer p.recMu.Unlock()
	for uid, r := range p.rec {
		if !r.keep(byUID, p.cfg.NodeName, now) {
			delete(p.rec, uid)
			continue
		}
		if pod, ok := byUID[uid]; ok {
			r.pod, r.seen = pod, true
		}
	}
}

// podSeen marks the record of a pod the informer shows as seen (its later absence then
// means it is gone, see keep), and drops it once the pod is terminal or terminating.
func (p *Plugin) podSeen(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	p.recMu.Lock()
	defer p.recMu.Unlock()
	r := p.rec[pod.UID]
	switch {
	case r == nil:
	case !livePod(pod, p.cfg.NodeName):
		delete(p.rec, pod.UID)
	default:
		r.pod, r.seen = pod, true
	}
}

// podGone drops the record of a pod the informer deleted (a tombstone too).
func (p *Plugin) podGone(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	p.recMu.Lock()
	defer p.recMu.Unlock()
	delete(p.rec, pod.UID)
}

func podsByUID(pods []*corev1.Pod) map[types.UID]*corev1.Pod {
	out := make(map[types.UID]*corev1.Pod, len(pods))
	for _, pod := range pods {
		out[pod.UID] = pod
	}
	return out
}

// record remembers that container ref of pod was served, and the pod's claim.
func (p *Plugin) record(pod *corev1.Pod, ref gpushare.ContainerRef, claim gpushare.PodAllocation) {
	p.recMu.Lock()
	defer p.recMu.Unlock()
	r := p.recordFor(pod.UID)
	// A refusal that guessed the wrong pod (no PodResources answer) is undone by serving it.
	r.pod, r.claim, r.refused, r.at = pod, claim, false, p.cfg.Clock.Now()
	r.served[ref] = true
	// Seen now when the informer holds the pod: its later absence from the view then means
	// it is gone, not that the informer lags (see keep).
	r.seen = r.seen || p.informerHas(pod)
}

// informerHas reports whether the pod informer holds this pod (same UID).
func (p *Plugin) informerHas(pod *corev1.Pod) bool {
	obj, ok, err := p.cfg.Pods.GetStore().GetByKey(pod.Namespace + "/" + pod.Name)
	if err != nil || !ok {
		return false
	}
	held, isPod := obj.(*corev1.Pod)
	return isPod && held.UID == pod.UID
}

// refuse remembers that the pod's admission fails (see podRecord.refused).
func (p *Plugin) refuse(pod *corev1.Pod) {
	p.recMu.Lock()
	defer p.recMu.Unlock()
	r := p.recordFor(pod.UID)
	r.pod, r.refused, r.at = pod, true, p.cfg.Clock.Now()
}

// recordFor returns the pod's record, made empty when there is none. Caller holds p.recMu.
func (p *Plugin) recordFor(uid types.UID) *podRecord {
	r := p.rec[uid]
	if r == nil {
		r = &podRecord{served: map[gpushare.ContainerRef]bool{}}
		p.rec[uid] = r
	}
	return r
}

// refusedPod reports whether Allocate refused the pod.
func (p *Plugin) refusedPod(uid types.UID) bool {
	p.recMu.Lock()
	defer p.recMu.Unlock()
	r := p.rec[uid]
	return r != nil && r.refused
}

// servedOf returns the containers of the pod this process served.
func (p *Plugin) servedOf(uid types.UID) map[gpushare.ContainerRef]bool {
	p.recMu.Lock()
	defer p.recMu.Unlock()
	out := map[gpushare.ContainerRef]bool{}
	if r := p.rec[uid]; r != nil {
		for ref := range r.served {
			out[ref] = true
		}
	}
	return out
}

// recordedClaim returns a copy of the claim recorded for the pod (zero when none).
func (p *Plugin) recordedClaim(uid types.UID) gpushare.PodAllocation {
	p.recMu.Lock()
	defer p.recMu.Unlock()
	var out gpushare.PodAllocation
	if r := p.rec[uid]; r != nil {
		out = mergeClaim(out, r.claim)
	}
	return out
}

// mergeClaim returns base with every container of over set to over's cards.
func mergeClaim(base, over gpushare.PodAllocation) gpushare.PodAllocation {
	var out gpushare.PodAllocation
	for _, src := range []gpushare.PodAllocation{base, over} {
		for i, cu := range src.App {
			out.Set(gpushare.ContainerRef{Index: i}, copyUnits(cu))
		}
		for i, cu := range src.Init {
			out.Set(gpushare.ContainerRef{InitList: true, Index: i}, copyUnits(cu))
		}
	}
	return out
}

func copyUnits(cu gpushare.CardUnits) gpushare.CardUnits {
	out := make(gpushare.CardUnits, len(cu))
	for c, u := range cu {
		out[c] = u
	}
	return out
}

// validAllocation returns the pod's gpu-mem request and its allocation annotations when
// they hold a valid allocation for this node. Errors: the request does not parse, or the
// allocation is absent, unreadable or invalid (gpushare.PodRequest.ValidateAllocationOn
// this node's cards).
func (p *Plugin) validAllocation(pod *corev1.Pod) (gpushare.PodRequest, gpushare.PodAllocation, error) {
	req, err := p.cfg.Resources.PodRequest(pod)
	if err != nil {
		return req, gpushare.PodAllocation{}, fmt.Errorf("reading the gpu-mem request: %w", err)
	}
	a, has, err := p.cfg.Resources.ReadAllocation(pod)
	switch {
	case err != nil:
		return req, gpushare.PodAllocation{}, err
	case !has:
		return req, gpushare.PodAllocation{}, fmt.Errorf("no allocation annotation")
	}
	if err := req.ValidateAllocationOn(a, p.cards.has); err != nil {
		return req, gpushare.PodAllocation{}, err
	}
	return req, a, nil
}

// claimOf is what a pod holds in the ledger: its valid allocation (a bound pod's allocation
// is a claim even before kubelet admits it), overridden by what this process served or
// chose for it. A pod with neither holds nothing: it gets cards when admitted. Nor does a
// pod whose admission Allocate refused.
func (p *Plugin) claimOf(pod *corev1.Pod) gpushare.PodAllocation {
	if p.refusedPod(pod.UID) {
		return gpushare.PodAllocation{}
	}
	_, base, _ := p.validAllocation(pod) // zero when invalid
	return mergeClaim(base, p.recordedClaim(pod.UID))
}

// heldByOthers returns, per card index, the units the live pods of this node other than
// skip hold (gpushare.PodAllocation.CardUsage of each pod's claim), counting recorded pods
// the pod view does not show yet.
func (p *Plugin) heldByOthers(pods []*corev1.Pod, skip types.UID) gpushare.CardUnits {
	held := gpushare.CardUnits{}
	shown := map[types.UID]bool{}
	for _, pod := range pods {
		shown[pod.UID] = true
		if pod.UID == skip || !livePod(pod, p.cfg.NodeName) {
			continue
		}
		for c, u := range p.claimOf(pod).CardUsage(pod) {
			held[c] += u
		}
	}
	p.recMu.Lock()
	defer p.recMu.Unlock()
	for uid, r := range p.rec {
		if uid == skip || shown[uid] || r.refused {
			continue
		}
		for c, u := range r.claim.CardUsage(r.pod) {
			held[c] += u
		}
	}
	return held
}

// rebuild adopts, after a restart, the pods whose annotations say this plugin served them
// (gpushare.io/allocated-containers, or ASSIGNED=true for all containers) and that hold a
// valid allocation, so /served and the ledger's record cover them again.
func (p *Plugin) rebuild(pods []*corev1.Pod) int {
	n := 0
	for _, pod := range pods {
		if !livePod(pod, p.cfg.NodeName) {
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
		for _, c := range req.Containers {
			if done[c.Ref] || pod.Annotations[gpushare.AnnotationAssigned] == "true" {
				p.record(pod, c.Ref, alloc)
			}
		}
		p.recMu.Lock()
		if r := p.rec[pod.UID]; r != nil {
			r.seen = true
			n++
		}
		p.recMu.Unlock()
	}
	return n
}

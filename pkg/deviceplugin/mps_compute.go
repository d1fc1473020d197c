package deviceplugin

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// mpsComputeRoom holds card c to the schedulers' compute rule for a pod bound without them
// (gpushare.AnnotationComputeShare): a card holds containers with compute shares up to 100 %
// together, or containers without, never both. It counts the running pods of the node (their
// grants, the usage ledger's) and cand's pod by alloc. Errors: *refusal naming the card and
// what it holds.
func (p *Plugin) mpsComputeRoom(cand candidate, c gpushare.Device, alloc gpushare.PodAllocation) error {
	pct, memOnly := computeOn(cand.pod, alloc, c.Index)
	for _, g := range (usageLedger{p}).Grants() {
		if g.Pod.UID == cand.pod.UID || g.Pod.Status.Phase == corev1.PodSucceeded || g.Pod.Status.Phase == corev1.PodFailed {
			continue
		}
		op, om := computeOn(g.Pod, g.Grant, c.Index)
		pct += op
		memOnly = memOnly || om
	}
	switch {
	case cand.cont.Compute > 0 && memOnly:
		return &refusal{msg: fmt.Sprintf("refusing container %q of pod %s: it has a compute share (%s: %d%%) and card %d (%s) holds containers without one, which MPS does not cap in SMs",
			cand.cont.Name, klog.KObj(cand.pod), gpushare.AnnotationComputeShare, cand.cont.Compute, c.Index, c.UUID)}
	case pct > gpushare.MaxComputeShare:
		return &refusal{msg: fmt.Sprintf("refusing container %q of pod %s: the compute shares (%s) on card %d (%s) would add up to %d%%",
			cand.cont.Name, klog.KObj(cand.pod), gpushare.AnnotationComputeShare, c.Index, c.UUID, pct)}
	case cand.cont.Compute == 0 && pct > 0:
		return &refusal{msg: fmt.Sprintf("refusing container %q of pod %s: it has no compute share and card %d (%s) holds %d%% of compute shares (%s); uncapped in SMs, it would run beside them",
			cand.cont.Name, klog.KObj(cand.pod), c.Index, c.UUID, pct, gpushare.AnnotationComputeShare)}
	}
	return nil
}

// computeOn is what pod's containers with units on card index i of alloc take of its
// compute: the sum of their shares (app and sidecar containers added, the largest init
// container's if more), and whether one of them has no share.
func computeOn(pod *corev1.Pod, alloc gpushare.PodAllocation, i int) (pct int, memOnly bool) {
	shares := computeSharesOf(pod)
	var app, init int
	for _, l := range []struct {
		isInit bool
		m      gpushare.Allocation
	}{{false, alloc.App}, {true, alloc.Init}} {
		for idx, cu := range l.m {
			if cu[i] <= 0 {
				continue
			}
			s, ok := shares[gpushare.ContainerRef{InitList: l.isInit, Index: idx}]
			switch {
			case !ok:
				memOnly = true
			case l.isInit:
				init = max(init, int(s))
			default:
				app += int(s)
			}
		}
	}
	return max(app, init), memOnly
}

// computeSharesOf is the compute share of each container the pod's
// gpushare.AnnotationComputeShare names, by container; nil when it names none or does not
// read (Allocate refuses such a pod's containers, so they hold no daemon).
func computeSharesOf(pod *corev1.Pod) map[gpushare.ContainerRef]uint8 {
	v, ok := pod.Annotations[gpushare.AnnotationComputeShare]
	if !ok {
		return nil
	}
	shares, err := gpushare.ParseComputeShares(v)
	if err != nil {
		return nil
	}
	byName := make(map[string]uint8, len(shares))
	for _, s := range shares {
		byName[s.Container] = uint8(s.Percent)
	}
	out := map[gpushare.ContainerRef]uint8{}
	for _, l := range []struct {
		init bool
		cs   []corev1.Container
	}{{false, pod.Spec.Containers}, {true, pod.Spec.InitContainers}} {
		for i, c := range l.cs {
			if pct, ok := byName[c.Name]; ok {
				out[gpushare.ContainerRef{InitList: l.init, Index: i}] = pct
			}
		}
	}
	return out
}

package deviceplugin

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// served is the plugin's own record of containers it has answered, per pod, so a second
// Allocate does not pick the same container before the informer shows the pod patch.
type served map[types.UID]map[gpushare.ContainerRef]bool

// match is the container an Allocate call is for.
type match struct {
	pod   *corev1.Pod
	req   gpushare.PodRequest
	cont  gpushare.ContainerRequest
	alloc gpushare.PodAllocation
	done  map[gpushare.ContainerRef]bool // containers served before this one
}

// findContainer picks the container kubelet is allocating units for: among the pods placed
// on node by the extender and not yet fully served, the ones whose next unserved gpu-mem
// container (init containers first, then app containers) requests exactly units; the oldest
// pod wins (creation time, then assume time, then namespace/name), the order kubelet admits
// pods. ok is false when no pod matches.
func findContainer(pods []*corev1.Pod, node string, res gpushare.Resources, mine served, units int64) (m match, ok bool) {
	var cands []match
	for _, pod := range pods {
		c, ok := nextContainer(pod, node, res, mine)
		if ok && c.cont.Units == units {
			cands = append(cands, c)
		}
	}
	if len(cands) == 0 {
		return match{}, false
	}
	sort.Slice(cands, func(i, j int) bool { return olderPod(cands[i].pod, cands[j].pod) })
	return cands[0], true
}

// nextContainer returns the pod's next unserved gpu-mem container, if the pod is a live
// gpushare pod bound to node with an allocation annotation.
func nextContainer(pod *corev1.Pod, node string, res gpushare.Resources, mine served) (match, bool) {
	if pod.Spec.NodeName != node || pod.DeletionTimestamp != nil ||
		pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed ||
		pod.Annotations[gpushare.AnnotationAssigned] == "true" {
		return match{}, false
	}
	alloc, ok, err := res.ReadAllocation(pod)
	if err != nil {
		klog.V(2).InfoS("Skipping pod with unreadable allocation", "pod", klog.KObj(pod), "err", err)
		return match{}, false
	}
	if !ok {
		return match{}, false
	}
	req, err := res.PodRequest(pod)
	if err != nil {
		klog.V(2).InfoS("Skipping pod with invalid gpu-mem request", "pod", klog.KObj(pod), "err", err)
		return match{}, false
	}
	done, err := gpushare.ParseAllocated(pod.Annotations[gpushare.AnnotationAllocated])
	if err != nil {
		klog.V(2).InfoS("Skipping pod with unreadable progress annotation", "pod", klog.KObj(pod), "err", err)
		return match{}, false
	}
	for ref := range mine[pod.UID] {
		done[ref] = true
	}
	for _, c := range req.Containers {
		if !done[c.Ref] {
			return match{pod: pod, req: req, cont: c, alloc: alloc, done: done}, true
		}
	}
	return match{}, false
}

func olderPod(a, b *corev1.Pod) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	if ta, tb := gpushare.AssumeTime(a), gpushare.AssumeTime(b); !ta.Equal(tb) {
		return ta.Before(tb)
	}
	return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
}

// cardsOf resolves the container's cards from the pod's allocation: the cards in index
// order with the units the container holds on each. Errors: no card for the container, a
// card index this node does not have, units that do not add up to the container's request.
func (m match) cardsOf(cards cardSet) ([]Card, []int64, error) {
	cu := m.alloc.For(m.cont.Ref)
	if len(cu) == 0 {
		return nil, nil, fmt.Errorf("pod %s: container %q (%s) has no card in its allocation annotation", klog.KObj(m.pod), m.cont.Name, m.cont.Ref)
	}
	idx := make([]int, 0, len(cu))
	var sum int64
	for i, u := range cu {
		idx = append(idx, i)
		sum += u
	}
	sort.Ints(idx)
	if sum != m.cont.Units {
		return nil, nil, fmt.Errorf("pod %s: container %q requests %d units but its allocation annotation holds %d", klog.KObj(m.pod), m.cont.Name, m.cont.Units, sum)
	}
	out := make([]Card, 0, len(idx))
	units := make([]int64, 0, len(idx))
	for _, i := range idx {
		c, ok := cards.byIndex[i]
		if !ok {
			return nil, nil, fmt.Errorf("pod %s: container %q is allocated card %d but this node has no such card (cards: %s)", klog.KObj(m.pod), m.cont.Name, i, indexList(cards.list))
		}
		out = append(out, c)
		units = append(units, cu[i])
	}
	return out, units, nil
}

func indexList(cards []Card) string {
	s := make([]string, len(cards))
	for i, c := range cards {
		s[i] = fmt.Sprint(c.Index)
	}
	return strings.Join(s, ",")
}

package deviceplugin

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// match is a container an Allocate call may be for.
type match struct {
	pod  *corev1.Pod
	req  gpushare.PodRequest
	cont gpushare.ContainerRequest
	done map[gpushare.ContainerRef]bool // containers served before this one
}

// findContainers lists the containers kubelet may be allocating units for: per live pod on
// node not yet fully served, its next unserved gpu-mem container (init containers first,
// then app containers), when that container requests exactly units. served returns the
// containers of a pod this process served. The oldest pod comes first (creation time, then
// assume time, then namespace/name), the order kubelet admits the pods of one batch.
func findContainers(pods []*corev1.Pod, node string, res gpushare.Resources, served func(*corev1.Pod) map[gpushare.ContainerRef]bool, units int64) []match {
	var cands []match
	for _, pod := range pods {
		c, ok := nextContainer(pod, node, res, served)
		if ok && c.cont.Units == units {
			cands = append(cands, c)
		}
	}
	sort.Slice(cands, func(i, j int) bool { return olderPod(cands[i].pod, cands[j].pod) })
	return cands
}

// nextContainer returns the pod's next unserved gpu-mem container, if the pod is live on
// node and not marked fully served. Pods with or without allocation annotations qualify:
// those without are placed by the plugin itself.
func nextContainer(pod *corev1.Pod, node string, res gpushare.Resources, served func(*corev1.Pod) map[gpushare.ContainerRef]bool) (match, bool) {
	if !livePod(pod, node) || pod.Annotations[gpushare.AnnotationAssigned] == "true" {
		return match{}, false
	}
	req, err := res.PodRequest(pod)
	if err != nil {
		klog.V(2).InfoS("Skipping pod with invalid gpu-mem request", "pod", klog.KObj(pod), "err", err)
		return match{}, false
	}
	if req.IsZero() {
		return match{}, false
	}
	done, err := gpushare.ParseAllocated(pod.Annotations[gpushare.AnnotationAllocated])
	if err != nil {
		klog.V(2).InfoS("Skipping pod with unreadable progress annotation", "pod", klog.KObj(pod), "err", err)
		return match{}, false
	}
	for ref := range served(pod) {
		done[ref] = true
	}
	for _, c := range req.Containers {
		if !done[c.Ref] {
			return match{pod: pod, req: req, cont: c, done: done}, true
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

// cardsOf resolves a container's cards from a claim: the cards in index order with the
// units the container holds on each. Errors: no card for the container, a card this node
// does not have, units that do not add up to the container's request.
func cardsOf(m match, claim gpushare.PodAllocation, cards cardSet) ([]gpushare.Device, []int64, error) {
	cu := claim.For(m.cont.Ref)
	if len(cu) == 0 {
		return nil, nil, fmt.Errorf("pod %s: container %q (%s) has no card in its allocation", klog.KObj(m.pod), m.cont.Name, m.cont.Ref)
	}
	var sum int64
	out := make([]gpushare.Device, 0, len(cu))
	units := make([]int64, 0, len(cu))
	for _, i := range slices.Sorted(maps.Keys(cu)) {
		c, ok := cards.byIndex[i]
		if !ok {
			return nil, nil, fmt.Errorf("pod %s: container %q is allocated card %d but this node has no such card (cards: %s)", klog.KObj(m.pod), m.cont.Name, i, indexList(cards.list))
		}
		sum += cu[i]
		out = append(out, c)
		units = append(units, cu[i])
	}
	if sum != m.cont.Units {
		return nil, nil, fmt.Errorf("pod %s: container %q requests %d units but its allocation holds %d", klog.KObj(m.pod), m.cont.Name, m.cont.Units, sum)
	}
	return out, units, nil
}

func indexList(cards []gpushare.Device) string {
	s := make([]string, len(cards))
	for i, c := range cards {
		s[i] = fmt.Sprint(c.Index)
	}
	return strings.Join(s, ",")
}

package deviceplugin

import (
	"context"
	"errors"
	"sort"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/nodecards"
)

// Why Allocate could not confirm the pod with kubelet's PodResources API (metric label).
const (
	ambiguousSeveral     = "several"
	ambiguousNone        = "none"
	ambiguousUnavailable = "unavailable"
)

// candidate is a container an Allocate call may be for.
type candidate struct {
	pod  *corev1.Pod
	req  gpushare.PodRequest
	cont gpushare.ContainerRequest
	done map[gpushare.ContainerRef]bool // containers served before this one
}

// nodeView is what one Allocate decides on: the node's pods and the ledger as it stood when
// they were listed.
type nodeView struct {
	pods   []*corev1.Pod
	grants snapshot
}

// findCandidate finds the container kubelet is allocating n units for, and returns it with
// the view of the node it was found in. Among the candidates (findContainers) the one
// kubelet's PodResources API shows being admitted wins. When the informer does not show
// that pod, it waits up to AllocateWait for it, then lists the node's pods once from the
// API server. Several such pods, none, or no answer from kubelet: the oldest candidate, as
// before PodResources was used, logged and counted in
// gpushare_plugin_allocate_ambiguous_total.
func (p *Plugin) findCandidate(ctx context.Context, n int64) (candidate, nodeView, error) {
	kp := p.kubeletPods(ctx)
	var (
		cands []candidate
		view  nodeView
		sure  *candidate
		why   string
	)
	// try reports whether waiting for a fresher view cannot change the answer.
	try := func(pods []*corev1.Pod) bool {
		view = p.viewOf(pods)
		cands = p.candidates(view, n)
		var c candidate
		c, why = pickCandidate(cands, kp)
		if why == "" {
			sure = &c
		}
		return why != ambiguousNone
	}
	if !try(p.podsOnNode()) {
		_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, p.cfg.AllocateWait, false, func(context.Context) (bool, error) {
			return try(p.podsOnNode()), nil
		})
	}
	if why == ambiguousNone {
		listed, err := p.listPods(ctx)
		switch {
		case err != nil && len(cands) == 0:
			return candidate{}, nodeView{}, status.Errorf(codes.Unavailable, "gpushare: no pod on node %s has a pending container requesting %d %s in the informer cache, and listing pods failed: %v",
				p.node.Name(), n, p.cfg.Resources.Mem, err)
		case err == nil:
			try(listed)
		}
	}
	if sure != nil {
		return *sure, view, nil
	}
	if len(cands) == 0 {
		return candidate{}, nodeView{}, status.Errorf(codes.NotFound,
			"gpushare: no pod bound to node %s has a not-yet-allocated container requesting %d %s", p.node.Name(), n, p.cfg.Resources.Mem)
	}
	if p.cfg.PodResourcesSocket != "" {
		p.ambiguous.WithLabelValues(why).Inc()
		klog.InfoS("Kubelet's PodResources did not single out the pod being admitted; serving the oldest candidate",
			"reason", why, "units", n, "pod", klog.KObj(cands[0].pod), "container", cands[0].cont.Name, "candidates", len(cands))
	}
	return cands[0], view, nil
}

// viewOf syncs the ledger with pods (the node's pods) and returns both.
func (p *Plugin) viewOf(pods []*corev1.Pod) nodeView {
	return nodeView{pods: pods, grants: p.ledger.sync(pods)}
}

func (p *Plugin) candidates(view nodeView, n int64) []candidate {
	return findContainers(view.pods, p.node.Name(), p.cfg.Resources, func(pod *corev1.Pod) map[gpushare.ContainerRef]bool { return view.grants.served(pod.UID) }, n)
}

// pickCandidate returns the candidate kubelet is admitting (why empty), else the oldest
// candidate (first) with why it is a guess: ambiguousUnavailable without kp,
// ambiguousNone when no candidate, or none of them, is being admitted, ambiguousSeveral
// when several are.
func pickCandidate(cands []candidate, kp kubeletPods) (c candidate, why string) {
	if len(cands) > 0 {
		c = cands[0]
	}
	if kp == nil {
		if len(cands) == 0 {
			return c, ambiguousNone
		}
		return c, ambiguousUnavailable
	}
	var hits []candidate
	for _, cand := range cands {
		if kp.admitting(cand) {
			hits = append(hits, cand)
		}
	}
	switch len(hits) {
	case 1:
		return hits[0], ""
	case 0:
		return c, ambiguousNone
	default:
		return c, ambiguousSeveral
	}
}

// candidateNow is findCandidate without waiting or listing: GetPreferredAllocation's guess.
func (p *Plugin) candidateNow(view nodeView, kp kubeletPods, n int64) (candidate, bool) {
	cands := p.candidates(view, n)
	c, _ := pickCandidate(cands, kp)
	return c, len(cands) > 0
}

// kubeletPods asks kubelet which pod it is admitting; nil when not configured or kubelet
// does not answer (logged once per failure streak).
func (p *Plugin) kubeletPods(ctx context.Context) kubeletPods {
	kp, err := listKubeletPods(ctx, p.cfg.PodResourcesSocket, string(p.cfg.Resources.Mem))
	switch {
	case errors.Is(err, errNoPodResources):
		return nil
	case err != nil:
		if !p.listFailing {
			klog.ErrorS(err, "Kubelet's PodResources API is unavailable; Allocate picks the oldest matching pod until it answers")
		}
		p.listFailing = true
		return nil
	}
	if p.listFailing {
		klog.InfoS("Kubelet's PodResources API answers again", "socket", p.cfg.PodResourcesSocket)
	}
	p.listFailing = false
	return kp
}

// podsOnNode returns the informer's pods (the informer only holds this node's pods).
func (p *Plugin) podsOnNode() []*corev1.Pod {
	return nodecards.PodsIn(p.pods.GetStore())
}

// informerHas reports whether the pod informer holds this pod (same UID).
func (p *Plugin) informerHas(pod *corev1.Pod) bool {
	obj, ok, err := p.pods.GetStore().GetByKey(pod.Namespace + "/" + pod.Name)
	if err != nil || !ok {
		return false
	}
	held, isPod := obj.(*corev1.Pod)
	return isPod && held.UID == pod.UID
}

func (p *Plugin) listPods(ctx context.Context) ([]*corev1.Pod, error) {
	list, err := p.node.Client().CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", p.node.Name()).String(),
	})
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// findContainers lists the containers kubelet may be allocating units for: per live pod on
// node not yet fully served, its next unserved gpu-mem container (init containers first,
// then app containers), when that container requests exactly units. served returns the
// containers of a pod this process served. The oldest pod comes first (creation time, then
// assume time, then namespace/name), the order kubelet admits the pods of one batch.
func findContainers(pods []*corev1.Pod, node string, res gpushare.Resources, served func(*corev1.Pod) map[gpushare.ContainerRef]bool, units int64) []candidate {
	var cands []candidate
	for _, pod := range pods {
		c, ok := nextContainer(pod, node, res, served)
		if ok && c.cont.Units == units {
			cands = append(cands, c)
		}
	}
	sort.Slice(cands, func(i, j int) bool { return olderPod(cands[i].pod, cands[j].pod) })
	return cands
}

// nextContainer returns the pod's next unserved gpu-mem container, if the pod is on node,
// neither finished nor terminating (kubelet starts no container of a pod being deleted) and
// not marked fully served. Pods with or without allocation annotations qualify: those
// without are placed by the plugin itself.
func nextContainer(pod *corev1.Pod, node string, res gpushare.Resources, served func(*corev1.Pod) map[gpushare.ContainerRef]bool) (candidate, bool) {
	if !holdsMemory(pod, node) || pod.DeletionTimestamp != nil || pod.Annotations[gpushare.AnnotationAssigned] == "true" {
		return candidate{}, false
	}
	req, err := res.PlacementRequest(pod) // its card choice binds the plugin's own choice
	if err != nil {
		klog.V(2).InfoS("Skipping pod with invalid gpu-mem request", "pod", klog.KObj(pod), "err", err)
		return candidate{}, false
	}
	if req.IsZero() {
		return candidate{}, false
	}
	done, err := gpushare.ParseAllocated(pod.Annotations[gpushare.AnnotationAllocated])
	if err != nil {
		klog.V(2).InfoS("Skipping pod with unreadable progress annotation", "pod", klog.KObj(pod), "err", err)
		return candidate{}, false
	}
	for ref := range served(pod) {
		done[ref] = true
	}
	for _, c := range req.Containers {
		if !done[c.Ref] {
			return candidate{pod: pod, req: req, cont: c, done: done}, true
		}
	}
	return candidate{}, false
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

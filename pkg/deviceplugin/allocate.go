package deviceplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// EventComponent is the source component of share-plugin's events.
const EventComponent = "gpushare-share-plugin"

// Event reasons on pods.
const (
	// EventAllocateRefused (Warning): a container's cards lack room; kubelet fails the pod.
	EventAllocateRefused = "GPUShareAllocateRefused"
	// EventCardChosen (Normal): the plugin chose the cards of a pod without a valid allocation.
	EventCardChosen = "GPUShareCardChosen"
)

// Why Allocate could not confirm the pod with kubelet's PodResources API (metric label).
const (
	ambiguousSeveral     = "several"
	ambiguousNone        = "none"
	ambiguousUnavailable = "unavailable"
)

// Allocate is called by kubelet once per container with only the fake device IDs. It finds
// the container (pick), checks the pod against the node's isolation label, decides its cards
// against the plugin's ledger (decide), records the truth on the pod and answers with the
// card UUIDs, and on an MPS node the container's MPS limit and daemon folders (mpsResponse). No match or no room is an error:
// kubelet then fails the pod's admission with the message, instead of the container
// silently running on a wrong or full card.
func (p *Plugin) Allocate(ctx context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	// Kubelet admits pods one at a time; serialising keeps "next unserved container" exact.
	p.mu.Lock()
	defer p.mu.Unlock()
	resp := &pluginapi.AllocateResponse{}
	for _, cr := range req.ContainerRequests {
		r, err := p.allocateOne(ctx, len(cr.DevicesIds))
		if err != nil {
			klog.ErrorS(err, "Allocate failed", "units", len(cr.DevicesIds))
			return nil, err
		}
		resp.ContainerResponses = append(resp.ContainerResponses, r)
	}
	return resp, nil
}

func (p *Plugin) allocateOne(ctx context.Context, n int) (*pluginapi.ContainerAllocateResponse, error) {
	if n <= 0 {
		return nil, status.Errorf(codes.InvalidArgument, "gpushare: allocate request with no %s devices", p.cfg.Resources.Mem)
	}
	m, pods, err := p.pick(ctx, int64(n))
	if err != nil {
		return nil, err
	}
	iso, isoErr, err := p.nodeIsolation(ctx)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "gpushare: %v", err)
	}
	var (
		d       decision
		mpsEnv  map[string]string
		mounts  []*pluginapi.Mount
		ref     *refusal
		refused = p.isolationRefusal(m, iso, isoErr)
	)
	if refused != nil {
		err = refused
	} else {
		d, err = p.decide(m, pods)
	}
	if err == nil && iso == gpushare.IsolationMPS {
		mpsEnv, mounts, err = p.mpsResponse(m, d.cards, d.units)
	}
	switch {
	case errors.As(err, &ref):
		p.refuse(m.pod)
		p.cfg.Recorder.Event(m.pod, corev1.EventTypeWarning, EventAllocateRefused, ref.msg)
		return nil, status.Errorf(codes.FailedPrecondition, "gpushare: %s", ref.msg)
	case err != nil:
		return nil, status.Errorf(codes.FailedPrecondition, "gpushare: %v", err)
	}
	done := m.done
	done[m.cont.Ref] = true
	all := true
	for _, c := range m.req.Containers {
		all = all && done[c.Ref]
	}
	if err := p.writePod(ctx, m, d, done, all); err != nil {
		return nil, status.Errorf(codes.Unavailable, "gpushare: recording allocation of pod %s container %q: %v", klog.KObj(m.pod), m.cont.Name, err)
	}
	p.record(m.pod, m.cont.Ref, d.claim)
	env := containerEnv(m, d.cards)
	maps.Copy(env, mpsEnv)
	if d.placed {
		p.cfg.Recorder.Eventf(m.pod, corev1.EventTypeNormal, EventCardChosen,
			"share-plugin chose the pod's cards (%s) because it had no valid allocation: %v", usageString(d.claim.CardUsage(m.pod)), d.why)
	}
	klog.InfoS("Allocated", "pod", klog.KObj(m.pod), "container", m.cont.Name, "units", n,
		"cards", env[gpushare.EnvIndex], "uuids", env[gpushare.EnvVisibleDevices], "perCard", d.units, "placedByPlugin", d.placed, "podAssigned", all,
		"isolation", iso, "mpsLimit", mpsEnv[gpushare.EnvMPSPinnedMemLimit])
	resp := p.handOver(env, d.cards)
	resp.Mounts = mounts
	return resp, nil
}

// pick finds the container kubelet is allocating n units for, and returns it with the
// node's pods it was found among. Among the candidates (findContainers) the one kubelet's
// PodResources API shows being admitted wins. When the informer does not show that pod, it
// waits up to AllocateWait for it, then lists the node's pods once from the API server.
// Several such pods, none, or no answer from kubelet: the oldest candidate, as before
// PodResources was used, logged and counted in gpushare_plugin_allocate_ambiguous_total.
func (p *Plugin) pick(ctx context.Context, n int64) (match, []*corev1.Pod, error) {
	adm := p.admission(ctx)
	var (
		cands []match
		pods  []*corev1.Pod
		sure  *match
		why   string
	)
	// try reports whether waiting for a fresher view cannot change the answer.
	try := func(view []*corev1.Pod) bool {
		pods = view
		p.syncRecords(view)
		cands = p.candidates(view, n)
		var m match
		m, why = choose(cands, adm)
		if why == "" {
			sure = &m
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
			return match{}, nil, status.Errorf(codes.Unavailable, "gpushare: no pod on node %s has a pending container requesting %d %s in the informer cache, and listing pods failed: %v",
				p.cfg.NodeName, n, p.cfg.Resources.Mem, err)
		case err == nil:
			try(listed)
		}
	}
	if sure != nil {
		return *sure, pods, nil
	}
	if len(cands) == 0 {
		return match{}, nil, status.Errorf(codes.NotFound,
			"gpushare: no pod bound to node %s has a not-yet-allocated container requesting %d %s", p.cfg.NodeName, n, p.cfg.Resources.Mem)
	}
	if p.cfg.PodResourcesSocket != "" {
		p.ambiguous.WithLabelValues(why).Inc()
		klog.InfoS("Kubelet's PodResources did not single out the pod being admitted; serving the oldest candidate",
			"reason", why, "units", n, "pod", klog.KObj(cands[0].pod), "container", cands[0].cont.Name, "candidates", len(cands))
	}
	return cands[0], pods, nil
}

func (p *Plugin) candidates(pods []*corev1.Pod, n int64) []match {
	return findContainers(pods, p.cfg.NodeName, p.cfg.Resources, func(pod *corev1.Pod) map[gpushare.ContainerRef]bool { return p.servedOf(pod.UID) }, n)
}

// choose returns the candidate kubelet is admitting (why empty), else the oldest candidate
// (first) with why it is a guess: ambiguousUnavailable without adm, ambiguousNone when no
// candidate, or none of them, is being admitted, ambiguousSeveral when several are.
func choose(cands []match, adm admission) (m match, why string) {
	if len(cands) > 0 {
		m = cands[0]
	}
	if adm == nil {
		if len(cands) == 0 {
			return m, ambiguousNone
		}
		return m, ambiguousUnavailable
	}
	var hits []match
	for _, c := range cands {
		if adm.admitting(c) {
			hits = append(hits, c)
		}
	}
	switch len(hits) {
	case 1:
		return hits[0], ""
	case 0:
		return m, ambiguousNone
	default:
		return m, ambiguousSeveral
	}
}

// pickNow is pick without waiting or listing: GetPreferredAllocation's guess.
func (p *Plugin) pickNow(pods []*corev1.Pod, adm admission, n int64) (match, bool) {
	cands := p.candidates(pods, n)
	m, _ := choose(cands, adm)
	return m, len(cands) > 0
}

// admission asks kubelet which pod it is admitting; nil when not configured or kubelet does
// not answer (logged once per failure streak).
func (p *Plugin) admission(ctx context.Context) admission {
	adm, err := listAdmission(ctx, p.cfg.PodResourcesSocket, string(p.cfg.Resources.Mem))
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
	return adm
}

// podsOnNode returns the informer's pods (the informer only holds this node's pods).
func (p *Plugin) podsOnNode() []*corev1.Pod {
	objs := p.cfg.Pods.GetStore().List()
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if pod, ok := o.(*corev1.Pod); ok {
			out = append(out, pod)
		}
	}
	return out
}

func (p *Plugin) listPods(ctx context.Context) ([]*corev1.Pod, error) {
	list, err := p.cfg.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", p.cfg.NodeName).String(),
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

// writePod records on the pod, before kubelet gets the answer, the served containers and
// ASSIGNED=true once all are served; for a pod the plugin placed, also the allocation it
// chose (the bind annotations, stale ones removed), so the extender and inspect see the
// truth. The pod's UID is a precondition: a re-created pod of the same name is not touched.
func (p *Plugin) writePod(ctx context.Context, m match, d decision, done map[gpushare.ContainerRef]bool, all bool) error {
	ann := map[string]*string{}
	if d.placed {
		bind := gpushare.BindAnnotations(d.claim, m.req.TotalUnits(), p.cardUnits(), p.cfg.Clock.Now())
		for _, k := range gpushare.BindAnnotationKeys() {
			if v, ok := bind[k]; ok {
				ann[k] = &v
			} else {
				ann[k] = nil
			}
		}
	}
	progress := gpushare.FormatAllocated(done)
	ann[gpushare.AnnotationAllocated] = &progress
	if all {
		t := "true"
		ann[gpushare.AnnotationAssigned] = &t
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": m.pod.UID, "annotations": ann}})
	if err != nil {
		return err
	}
	permanent := func(err error) bool { return apierrors.IsNotFound(err) || apierrors.IsConflict(err) }
	return retry.OnError(retry.DefaultBackoff, func(err error) bool { return !permanent(err) }, func() error {
		_, err := p.cfg.Client.CoreV1().Pods(m.pod.Namespace).Patch(ctx, m.pod.Name, types.MergePatchType, body, metav1.PatchOptions{})
		return err
	})
}

// usageString writes per-card units as "card 0: 4 units, card 1: 2 units".
func usageString(u gpushare.CardUnits) string {
	parts := make([]string, 0, len(u))
	for _, c := range slices.Sorted(maps.Keys(u)) {
		parts = append(parts, fmt.Sprintf("card %d: %d units", c, u[c]))
	}
	return strings.Join(parts, ", ")
}

// cardUnits is every card's size in units, by index.
func (p *Plugin) cardUnits() gpushare.CardUnits {
	out := gpushare.CardUnits{}
	for _, c := range p.cards.list {
		out[c.Index] = c.Units
	}
	return out
}

// containerEnv is what the container sees: its card UUIDs and indexes, its units, the pod's
// units and the size of its (first) card.
func containerEnv(m match, cards []gpushare.Device) map[string]string {
	uuids := make([]string, len(cards))
	idx := make([]string, len(cards))
	for i, c := range cards {
		uuids[i] = c.UUID
		idx[i] = strconv.Itoa(c.Index)
	}
	return map[string]string{
		gpushare.EnvVisibleDevices: strings.Join(uuids, ","),
		gpushare.EnvIndex:          strings.Join(idx, ","),
		gpushare.EnvPodUnits:       strconv.FormatInt(m.req.TotalUnits(), 10),
		gpushare.EnvContainerUnits: strconv.FormatInt(m.cont.Units, 10),
		gpushare.EnvDevUnits:       strconv.FormatInt(cards[0].Units, 10),
	}
}

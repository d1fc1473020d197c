package deviceplugin

import (
	"context"
	"encoding/json"
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

// Allocate is called by kubelet once per container with only the fake device IDs. It finds
// the container itself (findContainer), answers with the card UUIDs the extender chose and
// records progress on the pod. No match is an error: kubelet then fails the pod's admission
// with the message, instead of the container silently running on a wrong card.
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
	m, err := p.waitForMatch(ctx, int64(n))
	if err != nil {
		return nil, err
	}
	cards, units, err := m.cardsOf(p.cards)
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "gpushare: %v", err)
	}
	done := m.done
	done[m.cont.Ref] = true
	all := true
	for _, c := range m.req.Containers {
		all = all && done[c.Ref]
	}
	if err := p.recordProgress(ctx, m.pod, done, all); err != nil {
		return nil, status.Errorf(codes.Unavailable, "gpushare: recording allocation of pod %s container %q: %v", klog.KObj(m.pod), m.cont.Name, err)
	}
	if p.mine[m.pod.UID] == nil {
		p.mine[m.pod.UID] = map[gpushare.ContainerRef]bool{}
	}
	p.mine[m.pod.UID][m.cont.Ref] = true
	p.mineAt[m.pod.UID] = p.cfg.Clock.Now()
	env := containerEnv(m, cards)
	klog.InfoS("Allocated", "pod", klog.KObj(m.pod), "container", m.cont.Name, "units", n,
		"cards", env[gpushare.EnvIndex], "uuids", env[gpushare.EnvVisibleDevices], "perCard", units, "podAssigned", all)
	return &pluginapi.ContainerAllocateResponse{Envs: env}, nil
}

// waitForMatch looks for the container in the informer's view, waiting up to AllocateWait
// for the informer to catch up with a just-bound pod; as a last resort it lists the node's
// pods once from the API server.
func (p *Plugin) waitForMatch(ctx context.Context, n int64) (match, error) {
	var m match
	found := func(pods []*corev1.Pod) bool {
		p.pruneMine(pods)
		var ok bool
		m, ok = findContainer(pods, p.cfg.NodeName, p.cfg.Resources, p.mine, n)
		return ok
	}
	if found(p.podsOnNode()) {
		return m, nil
	}
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, p.cfg.AllocateWait, false, func(context.Context) (bool, error) {
		return found(p.podsOnNode()), nil
	})
	if m.pod != nil {
		return m, nil
	}
	pods, err := p.listPods(ctx)
	if err != nil {
		return match{}, status.Errorf(codes.Unavailable, "gpushare: no pod on node %s has a pending container requesting %d %s in the informer cache, and listing pods failed: %v",
			p.cfg.NodeName, n, p.cfg.Resources.Mem, err)
	}
	if found(pods) {
		return m, nil
	}
	return match{}, status.Errorf(codes.NotFound,
		"gpushare: no pod bound to node %s by the gpushare extender has a not-yet-allocated container requesting %d %s (is the scheduler extender configured, and did it bind this pod?)",
		p.cfg.NodeName, n, p.cfg.Resources.Mem)
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

// forgetAfter is how long the plugin remembers serving a pod that its view does not show:
// long enough to outlast informer lag (a pod found by the LIST fallback may not be in the
// informer yet), short enough not to pile up deleted pods.
const forgetAfter = 10 * time.Minute

// pruneMine forgets pods whose annotations already show our progress, and pods gone from
// the view for forgetAfter.
func (p *Plugin) pruneMine(pods []*corev1.Pod) {
	live := make(map[types.UID]*corev1.Pod, len(pods))
	for _, pod := range pods {
		live[pod.UID] = pod
	}
	for uid, refs := range p.mine {
		pod, ok := live[uid]
		if !ok {
			if p.cfg.Clock.Since(p.mineAt[uid]) > forgetAfter {
				delete(p.mine, uid)
				delete(p.mineAt, uid)
			}
			continue
		}
		ann, err := gpushare.ParseAllocated(pod.Annotations[gpushare.AnnotationAllocated])
		if err != nil {
			continue
		}
		caughtUp := true
		for r := range refs {
			caughtUp = caughtUp && ann[r]
		}
		if caughtUp {
			delete(p.mine, uid)
			delete(p.mineAt, uid)
		}
	}
}

// recordProgress patches the served containers, and ASSIGNED=true once all are served.
func (p *Plugin) recordProgress(ctx context.Context, pod *corev1.Pod, done map[gpushare.ContainerRef]bool, all bool) error {
	ann := map[string]string{gpushare.AnnotationAllocated: gpushare.FormatAllocated(done)}
	if all {
		ann[gpushare.AnnotationAssigned] = "true"
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err != nil {
		return err
	}
	return retry.OnError(retry.DefaultBackoff, func(err error) bool { return !apierrors.IsNotFound(err) }, func() error {
		_, err := p.cfg.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, body, metav1.PatchOptions{})
		return err
	})
}

// containerEnv is what the container sees: its card UUIDs and indexes, its units, the pod's
// units and the size of its (first) card.
func containerEnv(m match, cards []Card) map[string]string {
	uuids := make([]string, len(cards))
	idx := make([]string, len(cards))
	for i, c := range cards {
		uuids[i] = c.UUID
		idx[i] = strconv.Itoa(c.Index)
	}
	podUnits := m.pod.Annotations[gpushare.AnnotationPodUnits]
	if _, err := strconv.ParseInt(podUnits, 10, 64); err != nil {
		podUnits = strconv.FormatInt(m.req.TotalUnits(), 10)
	}
	return map[string]string{
		gpushare.EnvVisibleDevices: strings.Join(uuids, ","),
		gpushare.EnvIndex:          strings.Join(idx, ","),
		gpushare.EnvPodUnits:       podUnits,
		gpushare.EnvContainerUnits: strconv.FormatInt(m.cont.Units, 10),
		gpushare.EnvDevUnits:       strconv.FormatInt(cards[0].Units, 10),
	}
}

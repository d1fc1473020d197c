package cache

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// Pod is what the pod informer stores instead of a *corev1.Pod (New installs the transform):
// namespace, name, UID and resourceVersion, node name, whether the pod is terminal, and what
// the cache and bind read of the full object, derived once per event: the gpu-mem request,
// the units per card its allocation annotations give, which bind annotations it carries and,
// with Config.TrackWorkload, its CPU and memory request. 160 bytes plus its request (64 per
// gpu-mem container) and usage (16 per card), where even a trimmed corev1.Pod took 2.6 KB: at
// 40,000 pods that was most of the extender's heap. The node's accounting holds the same
// object. A Pod is never modified once built; share it, do not change it.
type Pod struct {
	objectMeta
	nodeName string
	terminal bool // phase Succeeded or Failed
	// placed: the pod carries card annotations (gpushare.Resources.ReadAllocation's ok).
	placed bool
	// reserved marks a Pod that Reserve made for a bind, not the informer (see nodeState.pods).
	reserved bool
	// bindKeys has bit i set when the pod carries gpushare.BindAnnotationKeys()[i].
	bindKeys uint16
	request  gpushare.PodRequest // gpu-mem per container
	// usage is what the allocation annotations give the pod on each card (CardUsage); only
	// read for pods that share a GPU.
	usage cardUsage
	// errs is nil unless the request or the allocation annotations are invalid: rare, so out
	// of line (8 bytes on every pod instead of 32).
	errs *podErrors
	// host is the effective CPU (millicores) and memory (MiB, rounded up) request; only
	// computed when the cache tracks the workload.
	host policy.Host
}

type podErrors struct {
	request error // why the gpu-mem request is invalid
	alloc   error // why the allocation annotations could not be read
}

var _ runtime.Object = (*Pod)(nil)

// NewPod derives the slim Pod from a full pod, as the informer stores it (without the
// CPU/memory request, which only workload tracking reads).
func NewPod(pod *corev1.Pod, res gpushare.Resources) *Pod { return newPod(pod, res, false) }

// newPod derives the slim Pod; withHost adds the effective CPU and memory request.
func newPod(pod *corev1.Pod, res gpushare.Resources, withHost bool) *Pod {
	p := &Pod{
		objectMeta: metaOf(&pod.ObjectMeta),
		nodeName:   intern(pod.Spec.NodeName),
		terminal:   pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed,
	}
	p.namespace = intern(p.namespace)
	for i, k := range gpushare.BindAnnotationKeys() {
		if _, has := pod.Annotations[k]; has {
			p.bindKeys |= 1 << i
		}
	}
	var reqErr, allocErr error
	p.request, reqErr = res.PodRequest(pod)
	if reqErr != nil || !p.request.IsZero() {
		// Pods without gpu-mem never reach the cache's accounting: skip their annotations.
		var alloc gpushare.PodAllocation
		alloc, p.placed, allocErr = res.ReadAllocation(pod)
		if p.placed {
			p.usage = usageOf(alloc.CardUsage(pod))
		}
	}
	if reqErr != nil || allocErr != nil {
		p.errs = &podErrors{request: reqErr, alloc: allocErr}
	}
	if withHost {
		p.host = hostRequest(pod)
	}
	return p
}

// podTransform is the pod informer's transform: *corev1.Pod in, *Pod out. Anything else
// passes through unchanged, so it is idempotent (client-go may hand it an object it already
// transformed, e.g. when the watch-list's temporary store feeds Replace).
func podTransform(res gpushare.Resources, withHost bool) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		if pod, ok := obj.(*corev1.Pod); ok {
			return newPod(pod, res, withHost), nil
		}
		return obj, nil
	}
}

// sharesGPU reports a pod the cache accounts: one requesting gpu-mem, or whose request is
// invalid (so that its annotations, if any, still count).
func (p *Pod) sharesGPU() bool { return p.requestErr() != nil || !p.request.IsZero() }

func (p *Pod) requestErr() error {
	if p.errs == nil {
		return nil
	}
	return p.errs.request
}

func (p *Pod) allocErr() error {
	if p.errs == nil {
		return nil
	}
	return p.errs.alloc
}

// Request returns the pod's gpu-mem request as gpushare.Resources.PodRequest read it from
// the full pod (zero for a pod without gpu-mem), or its error. The containers are shared:
// do not modify them.
func (p *Pod) Request() (gpushare.PodRequest, error) { return p.request, p.requestErr() }

// BindAnnotationKeys returns the keys among gpushare.BindAnnotationKeys that the pod carries
// (their values are not kept), in that order.
func (p *Pod) BindAnnotationKeys() []string {
	var out []string
	for i, k := range gpushare.BindAnnotationKeys() {
		if p.bindKeys&(1<<i) != 0 {
			out = append(out, k)
		}
	}
	return out
}

// GetObjectKind implements runtime.Object: a slim Pod carries no type metadata.
func (p *Pod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object (client-go's mutation detector copies stored
// objects).
func (p *Pod) DeepCopyObject() runtime.Object {
	out := *p
	out.request.Containers = slices.Clone(p.request.Containers)
	out.usage = slices.Clone(p.usage)
	return &out
}

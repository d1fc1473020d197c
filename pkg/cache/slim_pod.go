package cache

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// Pod is what the pod informer stores instead of a *corev1.Pod (New installs the transform):
// namespace, name, UID and resourceVersion, node and scheduler name, whether the pod is
// terminal, and what
// the cache and bind read of the full object, derived once per event: the gpu-mem request,
// the units per card its allocation annotations give, which bind annotations it carries and,
// with Config.TrackWorkload, its CPU and memory request and node constraint. 176 bytes plus its request (64 per
// gpu-mem container) and usage (16 per card), where even a trimmed corev1.Pod took 2.6 KB: at
// 40,000 pods that was most of the extender's heap. The node's accounting holds the same
// object. A Pod is never modified once built; share it, do not change it.
type Pod struct {
	objectMeta
	nodeName string
	// schedulerName is spec.schedulerName (interned: a cluster has a handful), which bind
	// checks against the schedulers the extender serves.
	schedulerName string
	terminal      bool // phase Succeeded or Failed
	// recorded: the pod carries card annotations (readable or not); a bound pod without them
	// was placed without the extender.
	recorded bool
	// reserved marks a Pod that Reserve made for a bind, not the informer (see nodeState.pods).
	reserved bool
	// unit is the unit the record says it counts in (gpushare.AnnotationUnit; 0: none, the
	// node's), compared with the node's when the pod is decided.
	unit unitCode
	// bindKeys has bit i set when the pod carries gpushare.BindAnnotationKeys()[i].
	bindKeys uint16
	// constraint is the pod's node constraint as the constraint book numbers it (0: none, or
	// not tracked); only with Config.TrackWorkload.
	constraint uint8
	// compute is the pod's compute share per card in percent (gpushare.PodRequest.PeakCompute
	// of its valid request with gpushare.AnnotationComputeShare), 0 for none, computeInvalid
	// when the annotation does not read.
	compute    uint8
	containers []gpushare.ContainerRequest // the gpu-mem request (gpushare.PodRequest.Containers)
	// usage is what the allocation annotations give the pod on each card (CardUsage), set
	// only when they are valid for the request (gpushare.PodRequest.ValidateAllocation); only
	// read for pods that share a GPU. For a Pod Reserve made, the cards it holds.
	usage cardUsage
	// rare is nil unless the request or the allocation annotations are invalid, or the pod
	// carries card annotations (gpushare.CardChoice): rare, so out of line (8 bytes on every
	// pod instead of 48).
	rare *podRare
	// host is the effective CPU (millicores) and memory (MiB, rounded up) request; only
	// computed when the cache tracks the workload.
	host policy.Host
}

// podRare is what few pods have.
type podRare struct {
	request error // why the gpu-mem request is invalid
	alloc   error // why the allocation annotations could not be read or do not fit the request
	// record is the card annotations found, "key=value" joined by ", " (values cut at
	// recordValueMax bytes), for the messages that say why the pod is counted as it is; only
	// when request or alloc is set.
	record string
	// rawUnits is gpushare.Resources.RawUnits, kept when the request is invalid.
	rawUnits int64
	// choice is the card choice of a pod with a valid gpu-mem request, or choiceErr why its
	// card annotations are invalid. Bind reads them; accounting never does.
	choice    *gpushare.CardChoice
	choiceErr error
	// computeErr is why the pod's compute-share annotation does not read (the pod then
	// counts as computeInvalid); bind reads it.
	computeErr error
}

// recordValueMax bounds how much of a tenant-written annotation a Pod keeps for messages.
const recordValueMax = 128

var _ runtime.Object = (*Pod)(nil)

// NewPod derives the slim Pod from a full pod, as the informer stores it (without the
// CPU/memory request, which only workload tracking reads).
func NewPod(pod *corev1.Pod, res gpushare.Resources) *Pod { return newPod(pod, res, nil) }

// newPod derives the slim Pod; with cons (workload tracking) it adds the effective CPU and
// memory request and the node constraint, numbered by cons.
func newPod(pod *corev1.Pod, res gpushare.Resources, cons *constraintBook) *Pod {
	p := &Pod{
		objectMeta:    metaOf(&pod.ObjectMeta),
		nodeName:      intern(pod.Spec.NodeName),
		schedulerName: intern(pod.Spec.SchedulerName),
		terminal:      pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed,
	}
	p.namespace = intern(p.namespace)
	for i, k := range gpushare.BindAnnotationKeys() {
		if _, has := pod.Annotations[k]; has {
			p.bindKeys |= 1 << i
		}
	}
	var reqErr, allocErr error
	req, reqErr := res.PodRequest(pod)
	p.containers = req.Containers
	if reqErr != nil || !req.IsZero() {
		// Pods without gpu-mem never reach the cache's accounting: skip their annotations.
		var alloc gpushare.PodAllocation
		alloc, p.recorded, allocErr = res.ReadAllocation(pod)
		if p.recorded && allocErr == nil {
			var u gpushare.Unit
			var has bool
			if u, has, allocErr = gpushare.RecordUnit(pod); has {
				p.unit = codeOf(u)
			}
		}
		switch {
		case allocErr != nil:
			p.recorded = true // there is a record, just not a readable one
		case p.recorded && reqErr == nil:
			// Tenants can write these annotations: only an allocation that is exactly what the
			// request asks for says which cards the pod holds.
			if err := req.ValidateAllocation(alloc); err != nil {
				allocErr = fmt.Errorf("allocation does not match the gpu-mem request: %w", err)
			} else {
				p.usage = usageOf(alloc.CardUsage(pod))
			}
		}
	}
	if reqErr != nil || allocErr != nil {
		p.rare = &podRare{request: reqErr, alloc: allocErr, record: recordOf(pod)}
		if reqErr != nil {
			p.rare.rawUnits = res.RawUnits(pod)
		}
	}
	if reqErr == nil && !req.IsZero() {
		if choice, err := gpushare.ParseCardChoice(pod.Annotations); choice != nil || err != nil {
			if p.rare == nil {
				p.rare = &podRare{}
			}
			p.rare.choice, p.rare.choiceErr = choice, err
		}
		p.readCompute(pod, req)
	}
	if cons != nil {
		p.host = hostRequest(pod)
		p.constraint = cons.id(pod)
	}
	return p
}

// readCompute sets the pod's compute share from its annotation (gpushare.WithComputeShares
// over its valid, non-zero request req): the containers with their shares and the pod's
// PeakCompute, or computeInvalid and why.
func (p *Pod) readCompute(pod *corev1.Pod, req gpushare.PodRequest) {
	if _, ok := pod.Annotations[gpushare.AnnotationComputeShare]; !ok {
		return
	}
	withShares, err := gpushare.WithComputeShares(pod, req)
	if err != nil {
		if p.rare == nil {
			p.rare = &podRare{}
		}
		p.compute, p.rare.computeErr = computeInvalid, err
		return
	}
	p.containers, p.compute = withShares.Containers, uint8(withShares.PeakCompute())
}

// recordOf lists the card annotations the pod carries, for messages.
func recordOf(pod *corev1.Pod) string {
	var parts []string
	for _, k := range []string{gpushare.AnnotationAllocation, gpushare.AnnotationInitAllocation, gpushare.AnnotationIndex} {
		v, ok := pod.Annotations[k]
		if !ok {
			continue
		}
		if len(v) > recordValueMax {
			v = v[:recordValueMax] + "…"
		}
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ", ")
}

// podTransform is the pod informer's transform: *corev1.Pod in, *Pod out. Anything else
// passes through unchanged, so it is idempotent (client-go may hand it an object it already
// transformed, e.g. when the watch-list's temporary store feeds Replace).
// cons is as newPod's.
func podTransform(res gpushare.Resources, cons *constraintBook) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		if pod, ok := obj.(*corev1.Pod); ok {
			return newPod(pod, res, cons), nil
		}
		return obj, nil
	}
}

// sharesGPU reports a pod the cache accounts: one requesting gpu-mem, or whose request is
// invalid (so that its annotations, if any, still count).
func (p *Pod) sharesGPU() bool { return p.requestErr() != nil || len(p.containers) > 0 }

// request is the pod's gpu-mem request, without its card choice.
func (p *Pod) request() gpushare.PodRequest { return gpushare.PodRequest{Containers: p.containers} }

func (p *Pod) requestErr() error {
	if p.rare == nil {
		return nil
	}
	return p.rare.request
}

func (p *Pod) allocErr() error {
	if p.rare == nil {
		return nil
	}
	return p.rare.alloc
}

// validRecord reports a pod whose card annotations are valid for its valid request: usage
// then says which cards it holds.
func (p *Pod) validRecord() bool { return p.recorded && p.requestErr() == nil && p.allocErr() == nil }

// record returns the card annotations found ("" when none, or when they were valid).
func (p *Pod) record() string {
	if p.rare == nil {
		return ""
	}
	return p.rare.record
}

// peakPerCard is the most gpu-mem units the pod may hold on any one card when its cards are
// unknown: the request's PeakPerCard; for an invalid request, the sum of its raw gpu-mem
// quantities, or MaxContainerUnits (the whole card) when that sum is 0, so that it never
// counts as nothing.
func (p *Pod) peakPerCard() int64 {
	if err := p.requestErr(); err != nil {
		if p.rare.rawUnits > 0 {
			return p.rare.rawUnits
		}
		return gpushare.MaxContainerUnits
	}
	return p.request().PeakPerCard()
}

// Request returns the pod's gpu-mem request as gpushare.Resources.PlacementRequest read it
// from the full pod (zero for a pod without gpu-mem), card choice and compute shares
// included (memory limits are not kept), or its error.
// The containers and the choice are shared: do not modify them.
func (p *Pod) Request() (gpushare.PodRequest, error) {
	if err := p.requestErr(); err != nil {
		return gpushare.PodRequest{}, err
	}
	req := p.request()
	if p.rare != nil {
		if p.rare.choiceErr != nil {
			return gpushare.PodRequest{}, p.rare.choiceErr
		}
		if p.rare.computeErr != nil {
			return gpushare.PodRequest{}, p.rare.computeErr
		}
		req.Choice = p.rare.choice
	}
	return req, nil
}

// SchedulerName returns the pod's spec.schedulerName as the object had it ("" only for an
// object that did not go through the API server's defaulting, which sets
// "default-scheduler").
func (p *Pod) SchedulerName() string { return p.schedulerName }

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
	out.containers = slices.Clone(p.containers)
	out.usage = slices.Clone(p.usage)
	return &out
}

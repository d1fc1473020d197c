package gpushare

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// AnnotationComputeShare is the pod annotation by which a tenant gives containers a share of
// their card's compute (streaming multiprocessors) beside their gpu-mem request: a
// comma-separated list of <container name>=<percent>, in steps of ComputeShareStep from
// ComputeShareStep to MaxComputeShare ("main=25,side=10"). Only nodes labelled
// LabelIsolation=IsolationMPS take such a pod: there the container's MPS control daemon caps
// each of its CUDA clients at that percentage of the card's SMs
// (set_default_active_thread_percentage), and placement keeps each card's shares at 100 %
// at most. A pod that names one container must name every gpu-mem container it has, each on
// one card. Set when the pod is created; the admission policy on allocation annotations
// refuses changing it later, since a running container's daemon cannot follow.
//
// Alibaba's name for a compute share is the extended resource aliyun.com/gpu-core.percentage
// (a container limit in percent, steps of 5, as kubeflow/arena writes it): an extended
// resource needs a device plugin on every node to advertise it and kubelet to count it,
// which share-plugin does not do; an annotation is read by the schedulers and share-plugin
// alone, like AnnotationMemLimit.
const AnnotationComputeShare = "gpushare.io/gpu-core"

// Bounds of a compute share, in percent of a card: the steps Alibaba's cGPU takes.
const (
	ComputeShareStep = 5
	MaxComputeShare  = 100
)

// ComputeShare is one entry of AnnotationComputeShare: a container's share of its card's
// compute in percent.
type ComputeShare struct {
	Container string
	Percent   int
}

// Computes reports whether any container of the pod has a compute share.
func (p PodRequest) Computes() bool {
	for _, c := range p.Containers {
		if c.Compute > 0 {
			return true
		}
	}
	return false
}

// PeakCompute is the most compute, in percent of a card, the pod's containers take at one
// time, by the effective-request rule (app and sidecar containers add up; each regular init
// container runs beside the sidecars started before it). The ledger counts it on each card
// the pod holds, whichever of its containers is there: exact for a pod of one container,
// more than it takes for containers spread over several cards.
func (p PodRequest) PeakCompute() int {
	var running, peak int
	for _, c := range p.Containers {
		switch c.Kind {
		case Init:
			peak = max(peak, running+int(c.Compute))
		default:
			running += int(c.Compute)
		}
	}
	return max(running, peak)
}

// WithComputeShares is req with each container's Compute read from the pod's
// AnnotationComputeShare (ParseComputeShares); req unchanged when the pod carries none.
// Errors, naming the annotation: ParseComputeShares', a container that requests no gpu-mem
// or asks for more than one card (a CUDA client connects to one MPS daemon), a gpu-mem
// container left without a share while others have one (a card holds either kind, never
// both), or shares adding up past MaxComputeShare (PeakCompute: the pod's shares count on
// each of its cards).
func WithComputeShares(pod *corev1.Pod, req PodRequest) (PodRequest, error) {
	v, ok := pod.Annotations[AnnotationComputeShare]
	if !ok {
		return req, nil
	}
	shares, err := ParseComputeShares(v)
	if err != nil {
		return PodRequest{}, fmt.Errorf("annotation %s: %w", AnnotationComputeShare, err)
	}
	out := req
	out.Containers = append([]ContainerRequest(nil), req.Containers...)
	byName := make(map[string]int, len(out.Containers))
	for i, c := range out.Containers {
		byName[c.Name] = i
	}
	for _, s := range shares {
		i, ok := byName[s.Container]
		if !ok {
			return PodRequest{}, fmt.Errorf("annotation %s: container %q requests no gpu-mem (or the pod has no such container); a compute share goes with a gpu-mem request", AnnotationComputeShare, clip(s.Container))
		}
		c := &out.Containers[i]
		if c.Cards != 1 {
			return PodRequest{}, fmt.Errorf("annotation %s: container %q asks for %d cards; a compute share is for a container on one card", AnnotationComputeShare, c.Name, c.Cards)
		}
		c.Compute = uint8(s.Percent)
	}
	for _, c := range out.Containers {
		if c.Compute == 0 {
			return PodRequest{}, fmt.Errorf("annotation %s: container %q requests gpu-mem but has no compute share; a pod with compute shares gives one to each gpu-mem container", AnnotationComputeShare, c.Name)
		}
	}
	if peak := out.PeakCompute(); peak > MaxComputeShare {
		return PodRequest{}, fmt.Errorf("annotation %s: the pod's compute shares add up to %d percent (containers running together), above one card's %d percent", AnnotationComputeShare, peak, MaxComputeShare)
	}
	return out, nil
}

// ParseComputeShares reads an AnnotationComputeShare value: <name>=<percent> entries, comma
// separated, spaces around entries ignored. Errors: splitContainerEntries' (size, shape,
// names), or a percent that is not a decimal integer (no sign, no '%'), not a multiple of
// ComputeShareStep, or outside ComputeShareStep..MaxComputeShare.
func ParseComputeShares(v string) ([]ComputeShare, error) {
	entries, err := splitContainerEntries(v, "<container>=<percent>")
	if err != nil {
		return nil, err
	}
	out := make([]ComputeShare, 0, len(entries))
	for _, e := range entries {
		p, err := parsePercent(e.value)
		if err != nil {
			return nil, fmt.Errorf("entry %q: %w", clip(e.text), err)
		}
		out = append(out, ComputeShare{Container: e.name, Percent: p})
	}
	return out, nil
}

// parsePercent reads a compute share: digits only, a multiple of ComputeShareStep in
// ComputeShareStep..MaxComputeShare.
func parsePercent(s string) (int, error) {
	if s == "" || len(s) > 3 || strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		return 0, fmt.Errorf("compute share %q: want a whole percent, %d..%d in steps of %d", clip(s), ComputeShareStep, MaxComputeShare, ComputeShareStep)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < ComputeShareStep || n > MaxComputeShare || n%ComputeShareStep != 0 {
		return 0, fmt.Errorf("compute share %q: want %d..%d in steps of %d", s, ComputeShareStep, MaxComputeShare, ComputeShareStep)
	}
	return n, nil
}

// FormatComputeShares writes the shares of req's containers as AnnotationComputeShare takes
// them, in req's order; "" when none has one.
func FormatComputeShares(req PodRequest) string {
	var parts []string
	for _, c := range req.Containers {
		if c.Compute > 0 {
			parts = append(parts, c.Name+"="+strconv.Itoa(int(c.Compute)))
		}
	}
	return strings.Join(parts, ",")
}

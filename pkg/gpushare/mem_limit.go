package gpushare

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// AnnotationMemLimit is the pod annotation by which a tenant gives containers a GPU-memory
// limit above their gpu-mem request: a comma-separated list of <container name>=<units>, in
// the units of the gpu-mem resource ("main=16,sidecar=2"). The request stays what the ledger
// guarantees and counts; on a node labelled LabelIsolation=IsolationLimit the container may
// allocate up to its limit (soft limit = request, hard limit = limit, per card), as far as
// the card has memory no other container uses. A container not named has its request as
// limit. Nodes in other modes refuse a pod that names one: nothing there would hold the
// container to its limit. Set when the pod is created; the admission policy on allocation
// annotations refuses changing it later, since the limits of running containers cannot follow.
//
// An annotation, not an extended resource: Kubernetes requires an extended resource's limit
// to equal its request, and a second resource would be counted by kube-scheduler against a
// node allocatable that no node has, and passed by kubelet to a device plugin to allocate.
const AnnotationMemLimit = "gpushare.io/gpu-mem-limit"

// Bounds of AnnotationMemLimit, which tenants write.
const (
	maxMemLimitValueBytes = 4096 // the annotation's value
	maxMemLimitEntries    = 64   // entries of it
)

// Limited reports whether the container has a limit above its request.
func (c ContainerRequest) Limited() bool { return c.Limit > c.Units }

// LimitUnits is the container's limit in units, all its cards together: Limit, or Units when
// it has none.
func (c ContainerRequest) LimitUnits() int64 { return max(c.Limit, c.Units) }

// LimitPerCard is the container's limit on each of its cards, in units.
func (c ContainerRequest) LimitPerCard() int64 { return c.LimitUnits() / int64(c.Cards) }

// Limited reports whether any container of the pod has a limit above its request.
func (p PodRequest) Limited() bool {
	for _, c := range p.Containers {
		if c.Limited() {
			return true
		}
	}
	return false
}

// WithMemLimits is req with each container's Limit read from the pod's AnnotationMemLimit
// (ParseMemLimits); req unchanged when the pod carries none. Errors are ParseMemLimits'.
func WithMemLimits(pod *corev1.Pod, req PodRequest) (PodRequest, error) {
	v, ok := pod.Annotations[AnnotationMemLimit]
	if !ok {
		return req, nil
	}
	limits, err := ParseMemLimits(v)
	if err != nil {
		return PodRequest{}, fmt.Errorf("annotation %s: %w", AnnotationMemLimit, err)
	}
	out := req
	out.Containers = append([]ContainerRequest(nil), req.Containers...)
	byName := make(map[string]int, len(out.Containers))
	for i, c := range out.Containers {
		byName[c.Name] = i
	}
	for _, e := range limits {
		i, ok := byName[e.Container]
		if !ok {
			return PodRequest{}, fmt.Errorf("annotation %s: container %q requests no gpu-mem (or the pod has no such container); a limit goes with a request", AnnotationMemLimit, clip(e.Container))
		}
		c := &out.Containers[i]
		switch {
		case e.Units < c.Units:
			return PodRequest{}, fmt.Errorf("annotation %s: container %q: limit %d is below its gpu-mem request %d", AnnotationMemLimit, c.Name, e.Units, c.Units)
		case e.Units%int64(c.Cards) != 0:
			return PodRequest{}, fmt.Errorf("annotation %s: container %q: limit %d is not divisible by its %d cards (each card gets an equal share)", AnnotationMemLimit, c.Name, e.Units, c.Cards)
		}
		c.Limit = e.Units
	}
	return out, nil
}

// MemLimit is one entry of AnnotationMemLimit: a container's limit in gpu-mem units, all its
// cards together.
type MemLimit struct {
	Container string
	Units     int64
}

// ParseMemLimits reads an AnnotationMemLimit value: <name>=<units> entries, comma separated,
// spaces around entries ignored. Errors: a value over 4 KiB or of more than 64 entries, an
// empty entry, one without '=', a name that is not a container name (DNS label), a name given
// twice, or units that are not a decimal integer in 1..MaxContainerUnits (no sign, no suffix).
func ParseMemLimits(v string) ([]MemLimit, error) {
	entries, err := splitContainerEntries(v, "<container>=<units>")
	if err != nil {
		return nil, err
	}
	out := make([]MemLimit, 0, len(entries))
	for _, e := range entries {
		n, err := parseUnits(e.value)
		if err != nil {
			return nil, fmt.Errorf("entry %q: %w", clip(e.text), err)
		}
		out = append(out, MemLimit{Container: e.name, Units: n})
	}
	return out, nil
}

// containerEntry is one <container>=<value> entry of a per-container pod annotation.
type containerEntry struct {
	text, name, value string
}

// splitContainerEntries splits a per-container annotation value (AnnotationMemLimit,
// AnnotationComputeShare) into its entries, checking everything but the values. want is the
// entry's shape, for errors. Errors: a value over 4 KiB or of more than 64 entries, an empty
// entry, one without '=', a name that is not a container name (DNS label), a name given twice.
func splitContainerEntries(v, want string) ([]containerEntry, error) {
	if len(v) > maxMemLimitValueBytes {
		return nil, fmt.Errorf("value is longer than %d bytes", maxMemLimitValueBytes)
	}
	parts := strings.Split(v, ",")
	if len(parts) > maxMemLimitEntries {
		return nil, fmt.Errorf("%d entries, at most %d", len(parts), maxMemLimitEntries)
	}
	out := make([]containerEntry, 0, len(parts))
	seen := map[string]bool{}
	for _, p := range parts {
		p = strings.TrimSpace(p)
		name, value, ok := strings.Cut(p, "=")
		if !ok {
			return nil, fmt.Errorf("entry %q: want %s", clip(p), want)
		}
		if !isDNSLabel(name) {
			return nil, fmt.Errorf("entry %q: %q is not a container name", clip(p), clip(name))
		}
		if seen[name] {
			return nil, fmt.Errorf("container %q is named twice", name)
		}
		seen[name] = true
		out = append(out, containerEntry{text: p, name: name, value: value})
	}
	return out, nil
}

// parseUnits reads a positive decimal count of units up to MaxContainerUnits, digits only.
func parseUnits(s string) (int64, error) {
	if s == "" || len(s) > 20 || strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		return 0, fmt.Errorf("limit %q: want a whole number of gpu-mem units", clip(s))
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 || n > MaxContainerUnits {
		return 0, fmt.Errorf("limit %q: want 1..%d units", clip(s), MaxContainerUnits)
	}
	return n, nil
}

// isDNSLabel reports a name Kubernetes accepts for a container: 1..63 lowercase letters,
// digits and '-', starting and ending with a letter or digit (RFC 1123 label).
func isDNSLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// FormatMemLimits writes the limits of req's limited containers as AnnotationMemLimit
// takes them, in req's order; "" when none has one.
func FormatMemLimits(req PodRequest) string {
	var parts []string
	for _, c := range req.Containers {
		if c.Limited() {
			parts = append(parts, c.Name+"="+strconv.FormatInt(c.Limit, 10))
		}
	}
	return strings.Join(parts, ",")
}

// LimitAllocation is a with each container's units on each card replaced by its limit there
// (LimitPerCard): what the pod's containers may allocate at most. Its CardUsage is the
// pod-level hard limit per card, by the same effective-request rule as the grant. Containers
// of a not in req keep their units.
func (req PodRequest) LimitAllocation(a PodAllocation) PodAllocation {
	out := PodAllocation{}
	for _, al := range []struct {
		init bool
		m    Allocation
	}{{false, a.App}, {true, a.Init}} {
		for idx, cu := range al.m {
			ref := ContainerRef{InitList: al.init, Index: idx}
			per := int64(-1)
			for _, c := range req.Containers {
				if c.Ref == ref && c.Limited() {
					per = c.LimitPerCard()
				}
			}
			cards := CardUnits{}
			for card, u := range cu {
				if per >= 0 {
					u = per
				}
				cards[card] = u
			}
			out.Set(ref, cards)
		}
	}
	return out
}

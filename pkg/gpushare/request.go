package gpushare

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// maxCardsPerContainer bounds gpu-count so a typo cannot make placement loop over absurd
// numbers; no node has more cards than this.
const maxCardsPerContainer = 64

// MaxContainerUnits bounds one container's gpu-mem units (1<<32: 4 EiB in GiB units, 4 PiB
// in MiB units, far beyond any card) so that sums over the containers, cards and pods of a
// node, of values validated against it, cannot overflow int64.
const MaxContainerUnits int64 = 1 << 32

// ContainerKind says when a container runs, which decides how its memory adds up.
type ContainerKind uint8

const (
	// App containers run together for the pod's whole life.
	App ContainerKind = iota
	// Init containers run one at a time, before the app containers.
	Init
	// Sidecar containers are init containers with restartPolicy Always: they start before the
	// later init containers and keep running beside the app containers.
	Sidecar
)

func (k ContainerKind) String() string {
	switch k {
	case Init:
		return "init"
	case Sidecar:
		return "sidecar"
	default:
		return "app"
	}
}

// ContainerRef names a container by its list and position: "app/0" is spec.containers[0],
// "init/1" is spec.initContainers[1] (sidecars included).
type ContainerRef struct {
	InitList bool
	Index    int
}

func (r ContainerRef) String() string {
	if r.InitList {
		return fmt.Sprintf("init/%d", r.Index)
	}
	return fmt.Sprintf("app/%d", r.Index)
}

// ContainerRequest is one container's gpu-mem demand: Cards distinct cards with
// Units/Cards units on each.
type ContainerRequest struct {
	Ref  ContainerRef
	Name string
	Kind ContainerKind
	// Compute is the container's share of its card's compute in percent (5..100, steps of
	// 5), from the pod's AnnotationComputeShare (WithComputeShares); 0 for none. A uint8
	// beside Kind keeps the struct at 64 bytes.
	Compute uint8
	Units   int64 // total gpu-mem units of the container (its gpu-mem resource limit): its request
	Cards   int   // distinct cards (gpu-count limit, default 1)
	// Limit is the container's GPU-memory limit in units, all its cards together, from the
	// pod's AnnotationMemLimit (WithMemLimits; PlacementRequest reads it): above Units, or 0
	// for none. Nothing counts it: the ledger, fgd and every filter count Units.
	Limit int64
}

// PerCard is the units the container needs on each of its cards.
func (c ContainerRequest) PerCard() int64 { return c.Units / int64(c.Cards) }

// PodRequest lists a pod's containers that request gpu-mem: init containers (regular and
// sidecar) in spec order first, then app containers in spec order — the order kubelet
// admits and allocates them.
type PodRequest struct {
	Containers []ContainerRequest
	// Choice is the pod's card choice (PlacementRequest; nil from PodRequest, or for a pod
	// without card annotations): the cards it may use and its own card policy.
	Choice *CardChoice
}

// IsZero reports a pod that requests no gpu-mem.
func (p PodRequest) IsZero() bool { return len(p.Containers) == 0 }

// TotalUnits is the pod's gpu-mem as Kubernetes counts it on the node (the effective
// request): max(sum of app and sidecar containers, for each regular init container its own
// units plus the sidecars started before it).
func (p PodRequest) TotalUnits() int64 {
	var running, peak int64
	for _, c := range p.Containers {
		switch c.Kind {
		case Init:
			if v := running + c.Units; v > peak {
				peak = v
			}
		default:
			running += c.Units
		}
	}
	if running > peak {
		return running
	}
	return peak
}

// PeakPerCard is the most units the pod can hold on any one card at a time, in gpu-mem
// units: the effective-request rule applied to each container's PerCard (app and sidecar
// containers add up; each regular init container runs beside the sidecars started before
// it). It is what a pod whose cards are unknown may hold on any card.
func (p PodRequest) PeakPerCard() int64 {
	var running, peak int64
	for _, c := range p.Containers {
		switch c.Kind {
		case Init:
			if v := running + c.PerCard(); v > peak {
				peak = v
			}
		default:
			running += c.PerCard()
		}
	}
	return max(running, peak)
}

// MaxCards is the largest card count any one container needs.
func (p PodRequest) MaxCards() int {
	n := 0
	for _, c := range p.Containers {
		if c.Cards > n {
			n = c.Cards
		}
	}
	return n
}

// PodRequest reads the pod's gpu-mem demand from container limits (requests when limits are
// absent). Errors name the container and the rule broken: gpu-count without gpu-mem, units
// not divisible by the card count, counts out of range. A pod with no gpu-mem returns a
// zero PodRequest and no error.
func (r Resources) PodRequest(pod *corev1.Pod) (PodRequest, error) {
	var req PodRequest
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		kind := Init
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			kind = Sidecar
		}
		if err := r.appendContainer(&req, c, ContainerRef{InitList: true, Index: i}, kind); err != nil {
			return PodRequest{}, err
		}
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if err := r.appendContainer(&req, c, ContainerRef{Index: i}, App); err != nil {
			return PodRequest{}, err
		}
	}
	return req, nil
}

func (r Resources) appendContainer(req *PodRequest, c *corev1.Container, ref ContainerRef, kind ContainerKind) error {
	mem := quantity(c.Resources, r.Mem)
	count := quantity(c.Resources, r.Count)
	switch {
	case mem < 0:
		return fmt.Errorf("container %q: %s %d is negative", c.Name, r.Mem, mem)
	case mem > MaxContainerUnits:
		return fmt.Errorf("container %q: %s %d is above the limit of %d units", c.Name, r.Mem, mem, MaxContainerUnits)
	case mem == 0 && count > 0:
		return fmt.Errorf("container %q: %s %d without %s", c.Name, r.Count, count, r.Mem)
	case mem == 0:
		return nil
	}
	cards := int64(1)
	if count != 0 {
		cards = count
	}
	switch {
	case cards < 1 || cards > maxCardsPerContainer:
		return fmt.Errorf("container %q: %s %d out of range 1..%d", c.Name, r.Count, cards, maxCardsPerContainer)
	case mem%cards != 0:
		return fmt.Errorf("container %q: %s %d is not divisible by %s %d (each card gets an equal share)",
			c.Name, r.Mem, mem, r.Count, cards)
	}
	req.Containers = append(req.Containers, ContainerRequest{
		Ref: ref, Name: c.Name, Kind: kind, Units: mem, Cards: int(cards),
	})
	return nil
}

// RawUnits sums the gpu-mem limits (requests when limits are absent) of every container of
// the pod, regular, init and sidecar alike, each clamped to 0..MaxContainerUnits, without
// any of PodRequest's checks: what a pod whose request is invalid may hold at most.
func (r Resources) RawUnits(pod *corev1.Pod) int64 {
	var sum int64
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			sum += min(max(quantity(list[i].Resources, r.Mem), 0), MaxContainerUnits)
		}
	}
	return sum
}

// quantity returns the limit of name, else its request, as an integer (0 when absent).
func quantity(rr corev1.ResourceRequirements, name corev1.ResourceName) int64 {
	if q, ok := rr.Limits[name]; ok {
		return q.Value()
	}
	if q, ok := rr.Requests[name]; ok {
		return q.Value()
	}
	return 0
}

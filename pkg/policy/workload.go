package policy

import (
	"sort"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// Shape is a typical pod: Cards distinct cards with PerCard units each (Cards 0: a pod
// without gpu-mem), its host request, and its share of all pods seen (Weight; the weights of
// a Workload sum to 1).
type Shape struct {
	Cards   int
	PerCard int64
	Host    Host
	// Constraint is where the pod may run (0: anywhere); a node in whose Unmet it is offers
	// the shape nothing.
	Constraint Constraint
	Weight     float64
}

// Workload is the popularity of typical shapes, most popular first.
type Workload []Shape

// The workload fgd scores against, as the extender and the offline replay learn it: every
// shape seen (coverage 1; the paper keeps the shapes covering 95 % of pods, but the rare
// ones it drops are the large multi-card pods that most need whole cards and nodes kept
// free), at most WorkloadMaxShapes of them (the default trace has 151 distinct shapes with
// CPU and memory), which bounds the cost of scoring a node.
const (
	WorkloadCoverage  = 1.0
	WorkloadMaxShapes = 256
)

type shapeKey struct {
	cards      int
	perCard    int64
	host       Host
	constraint Constraint
}

// ShapeCounter counts the shapes of pods seen so far. Not safe for concurrent use; the caller
// guards it.
type ShapeCounter struct {
	counts map[shapeKey]int64
	total  int64
}

// Add counts one pod: its shape is its largest app or sidecar container (init containers are
// transient; several gpu-mem containers in one pod are rare), its host request and its node
// constraint (0: none).
func (s *ShapeCounter) Add(req gpushare.PodRequest, host Host, c Constraint) {
	if s.counts == nil {
		s.counts = make(map[shapeKey]int64)
	}
	s.counts[shapeOf(req, host, c)]++
	s.total++
}

// Remove uncounts one pod Add counted with the same arguments; a shape never added is left
// alone.
func (s *ShapeCounter) Remove(req gpushare.PodRequest, host Host, c Constraint) {
	k := shapeOf(req, host, c)
	n, ok := s.counts[k]
	if !ok {
		return
	}
	if n <= 1 {
		delete(s.counts, k)
	} else {
		s.counts[k] = n - 1
	}
	s.total--
}

// shapeOf is the shape Add counts a pod as.
func shapeOf(req gpushare.PodRequest, host Host, c Constraint) shapeKey {
	k := shapeKey{host: host, constraint: c}
	for _, c := range req.Containers {
		if c.Kind == gpushare.Init {
			continue
		}
		if c.PerCard()*int64(c.Cards) > k.perCard*int64(k.cards) {
			k.cards, k.perCard = c.Cards, c.PerCard()
		}
	}
	return k
}

// Total is the number of pods counted.
func (s *ShapeCounter) Total() int64 { return s.total }

// Workload returns the most popular shapes that together cover at least `coverage` (0..1] of
// the containers counted, at most max of them, with weights renormalised to sum to 1. This
// is the "typical pods" of the FGD paper (which uses coverage 0.95), learned online; fgd
// uses WorkloadCoverage and WorkloadMaxShapes.
func (s *ShapeCounter) Workload(coverage float64, max int) Workload {
	if s.total == 0 || max <= 0 {
		return nil
	}
	w := make(Workload, 0, len(s.counts))
	for k, n := range s.counts {
		w = append(w, Shape{Cards: k.cards, PerCard: k.perCard, Host: k.host, Constraint: k.constraint, Weight: float64(n)})
	}
	sort.Slice(w, func(i, j int) bool {
		if w[i].Weight != w[j].Weight {
			return w[i].Weight > w[j].Weight
		}
		if w[i].Cards != w[j].Cards {
			return w[i].Cards < w[j].Cards
		}
		if w[i].PerCard != w[j].PerCard {
			return w[i].PerCard < w[j].PerCard
		}
		if w[i].Host.CPUMilli != w[j].Host.CPUMilli {
			return w[i].Host.CPUMilli < w[j].Host.CPUMilli
		}
		if w[i].Host.MemoryMiB != w[j].Host.MemoryMiB {
			return w[i].Host.MemoryMiB < w[j].Host.MemoryMiB
		}
		return w[i].Constraint < w[j].Constraint
	})
	var covered, kept float64
	n := 0
	for n < len(w) && n < max && covered < coverage*float64(s.total) {
		covered += w[n].Weight
		n++
	}
	w = w[:n]
	for _, sh := range w {
		kept += sh.Weight
	}
	for i := range w {
		w[i].Weight /= kept
	}
	return w
}

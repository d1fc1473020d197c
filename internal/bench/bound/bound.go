package bound

import (
	"context"
	"fmt"
)

// Options bound the work of Compute. Zero values take the defaults.
type Options struct {
	// MaxPodClasses: pods' cpu and memory are rounded down (to fewer leading binary digits)
	// until there are at most this many pod classes (default 160). Each class is a row of the
	// dense simplex, whose time grows with the cube of the rows.
	MaxPodClasses int
	// MaxRounds of cuts (default 12); each round solves the program once more.
	MaxRounds int
	// MaxK: the largest k of u^(k) tried (default 6).
	MaxK int
}

// Result is the bound and how it was reached.
type Result struct {
	CapacityMilli int64 // GPU capacity of the nodes, GPU-milli
	ArrivedMilli  int64 // GPU request of the pods, GPU-milli
	// AllocatedMilli: the most GPU-milli any placement can allocate, as bounded by the
	// program (at least the true optimum).
	AllocatedMilli float64
	// UnallocatedPct: 100 − AllocatedMilli in % of capacity — at most the least
	// unallocated GPU % of any scheduler.
	UnallocatedPct float64
	// PlainPct: the same from the program without cuts.
	PlainPct    float64
	Rounds      int // cut rounds run
	Cuts        int // cuts added
	PodClasses  int
	NodeClasses int
	// SigBits: the leading binary digits kept of the pods' cpu and memory (-1: exact; 0:
	// cpu and memory dropped).
	SigBits int
	// Stop says why the rounds ended: StopConverged, StopRounds, or the simplex's error in
	// the last round (the bound is then the round before's).
	Stop string
}

// Why the rounds of cuts ended (Result.Stop).
const (
	StopConverged = "converged" // no cut is violated: more rounds would not move the bound
	StopRounds    = "max-rounds"
)

func (o Options) withDefaults() Options {
	if o.MaxPodClasses <= 0 {
		o.MaxPodClasses = 160
	}
	if o.MaxRounds <= 0 {
		o.MaxRounds = 12
	}
	if o.MaxK <= 0 {
		o.MaxK = 6
	}
	return o
}

// Compute bounds from below the unallocated GPU % (of the nodes' GPU capacity) that any
// placement of any subset of pods reaches (doc.go). Errors: no GPU capacity, a pod's
// GPU-milli outside 0..1000, the simplex failing on the first program, ctx cancelled. A
// failure in a later round keeps the bound of the round before, which is valid.
func Compute(ctx context.Context, nodes []Node, pods []Pod, o Options) (Result, error) {
	o = o.withDefaults()
	var res Result
	for _, n := range nodes {
		if n.Cards > 0 {
			res.CapacityMilli += int64(n.Cards) * cardMilli
		}
	}
	if res.CapacityMilli == 0 {
		return res, fmt.Errorf("bound: the nodes have no GPU")
	}
	for _, p := range pods {
		if p.NumGPU > 0 {
			res.ArrivedMilli += p.gpuMilli()
		}
	}
	classes, sig, err := podClasses(pods, o.MaxPodClasses)
	if err != nil {
		return res, fmt.Errorf("bound: %w", err)
	}
	nc := groupNodes(nodes)
	res.PodClasses, res.NodeClasses, res.SigBits = len(classes), len(nc), sig
	p := newProgram(nc, classes)
	cards, x, err := p.solve()
	if err != nil {
		return res, fmt.Errorf("bound: %w", err)
	}
	res.PlainPct = res.pct(cards)
	if cards, err = tighten(ctx, p, o, cards, x, &res); err != nil {
		return res, err
	}
	res.AllocatedMilli = cards * cardMilli
	res.UnallocatedPct = res.pct(cards)
	return res, nil
}

// tighten adds rounds of cuts to p, whose optimum without them is cards at x, and
// returns the last optimum; res gets the rounds, the cuts and why they stopped. Each round
// adds, per bin family, the cut that the current optimum violates most, unless the program
// has it already.
func tighten(ctx context.Context, p *program, o Options, cards float64, x []float64, res *Result) (float64, error) {
	families := p.binFamilies(o.MaxK)
	added := map[string]bool{}
	rows := map[string]bool{}
	for _, r := range p.rows {
		rows[r.key()] = true
	}
	for res.Rounds < o.MaxRounds {
		if err := ctx.Err(); err != nil {
			return cards, fmt.Errorf("bound: %w", err)
		}
		var cuts []row
		for i := range families {
			if r, ok := families[i].mostViolated(x, 1e-6, added); ok {
				added[r.name] = true
				// Families can give the same inequality (the cards and the node of a
				// one-card node): twice the same row leaves the simplex a singular basis.
				if k := r.key(); !rows[k] {
					rows[k] = true
					cuts = append(cuts, r)
				}
			}
		}
		if len(cuts) == 0 {
			res.Stop = StopConverged
			break
		}
		res.Rounds++
		res.Cuts += len(cuts)
		p.rows = append(p.rows, cuts...)
		c, xc, err := p.solve()
		if err != nil {
			res.Stop = err.Error() // the rounds before gave a valid bound
			break
		}
		cards, x = min(cards, c), xc
	}
	if res.Stop == "" {
		res.Stop = StopRounds
	}
	return cards, nil
}

// pct is the unallocated % of capacity when cards are allocated, never below 0.
func (r Result) pct(cards float64) float64 {
	return max(0, 100-100*cards*cardMilli/float64(r.CapacityMilli))
}

// podClasses groups the pods, rounding cpu and memory down until at most limit classes
// remain, and returns the leading binary digits kept (-1: exact).
func podClasses(pods []Pod, limit int) ([]podClass, int, error) {
	for _, sig := range []int{-1, 6, 4, 3, 2, 1, 0} {
		classes, err := groupPods(pods, sig)
		if err != nil {
			return nil, 0, err
		}
		if len(classes) <= limit || sig == 0 {
			return classes, sig, nil
		}
	}
	panic("unreachable")
}

package policy

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// fgdGoldenDigest is the SHA-256 of replayFGD(fgdGoldenSeed): fgd against a workload of 151
// learned shapes on a small cluster whose nodes fill and drain pod after pod, as the
// extender and the offline replay drive it. TestPlacementGoldenDigest's workloads have at
// most four shapes; this one pins fgd where its cost lies (many shapes, many nodes sharing
// a state, weights that change with every pod). Every score bit, card choice and node choice
// is written: a change here is a change of behaviour, unless fgdGoldenChoicesDigest holds,
// when it is a sum done in another order (scores moved in their last bits, no decision did).
const (
	fgdGoldenSeed   = 11
	fgdGoldenDigest = "82bf2d9ca67dcc129cdd733d4efcd448c1399d615bd6e3b6ee9d228919bf7d73"
)

// fgdGoldenChoicesDigest and fgdConstrainedChoicesDigest are the digests of the same
// streams without the scores' bits (choicesOf): every fit, card choice, node choice and
// normalized score.
// They hold where an optimisation changes scores in their last bits but no decision.
const (
	fgdGoldenChoicesDigest      = "c43b3fac76804d89ebe69caacc973c8c99986b4e597beb139d4f1361d74a1122"
	fgdConstrainedChoicesDigest = "687f15c547ab20d62db4d26a3601bd2f90134565456b43a3507beb022b62ca2f"
)

// fgdConstrainedDigest is the SHA-256 of replayFGD(fgdGoldenSeed) with node constraints:
// the same pods, nodes of three kinds, a third of the shapes constrained to some kinds, the
// workload weighed by scarcity (Workload.ByScarcity over ReachOf) and constrained pods placed
// only where their constraint is met. The unconstrained digest above does not move with it.
const fgdConstrainedDigest = "87bd791df8b9b3b630d6c8dbf480a7433a5997cea8e8bf919731f263f9bbf42f"

// fgdCapacityDigest and fgdCapacityChoicesDigest are the digests of replayFGD(fgdGoldenSeed)
// where fgd is given the cluster's capacity with its CPU and memory scaled by 1.6: the host
// pressure of the learned workload starts below fgd's ramp and ends at its top, so the host
// cap uses the workload's average requests, a blend, and each shape's own in turn.
const (
	fgdCapacityDigest        = "8599e06921ff1c66456c9f60268ec504a560016f47eaa078e63e615f074c44e8"
	fgdCapacityChoicesDigest = "57826801efd11e30ee3fe57f87145f82b1a69bc0924d155a0bd7279cbe720d4c"
)

// TestFGDGoldenDigests replays the golden workload plain, with node constraints and with a
// capacity, and compares each stream's digests; each variant must change some decision of
// the plain one.
func TestFGDGoldenDigests(t *testing.T) {
	for _, tc := range []struct {
		name         string
		opts         goldenOptions
		all, choices string
	}{
		{"plain", goldenOptions{}, fgdGoldenDigest, fgdGoldenChoicesDigest},
		{"constraints", goldenOptions{constrained: true}, fgdConstrainedDigest, fgdConstrainedChoicesDigest},
		{"capacity", goldenOptions{hostScale: 1.6}, fgdCapacityDigest, fgdCapacityChoicesDigest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if shapes := replayFGD(&out, fgdGoldenSeed, 100, 900, tc.opts); shapes != 151 {
				t.Fatalf("workload has %d shapes, want 151", shapes)
			}
			if tc.opts.hostScale != 0 {
				checkOwnRamp(t, out.String())
			}
			all, choices := digests(out.Bytes())
			if tc.opts != (goldenOptions{}) && choices == fgdGoldenChoicesDigest {
				t.Fatal("the variant changed no decision")
			}
			if choices != tc.choices {
				t.Errorf("digest of fgd's choices = %s, want %s", choices, tc.choices)
			}
			if all != tc.all {
				t.Errorf("digest of fgd's scores and choices = %s, want %s", all, tc.all)
			}
		})
	}
}

// checkOwnRamp fails unless the stream's "own" lines show fgd's own share at 0, between 0
// and 1, and at 1: the host pressure crossed the whole ramp.
func checkOwnRamp(t *testing.T, stream string) {
	t.Helper()
	var below, blend, top bool
	for _, line := range strings.Split(stream, "\n") {
		var step int
		var own float64
		if n, _ := fmt.Sscanf(line, "s%d own %g", &step, &own); n == 2 {
			below, blend, top = below || own == 0, blend || own > 0 && own < 1, top || own == 1
		}
	}
	if !below || !blend || !top {
		t.Errorf("own share: at 0 %v, between %v, at 1 %v; want the pressure to cross the whole ramp", below, blend, top)
	}
}

// goldenConstraints draws, from a source of its own (so the unconstrained replay draws what
// it always drew), a kind 0..2 per node and a constraint per shape: 0 for two in three,
// else 1 (kind 0 only), 2 (kind 1 or 2) or 3 (kind 2 only). It returns each node's Unmet set
// and each shape's constraint.
func goldenConstraints(seed int64, nodes, shapes int) ([]ConstraintSet, []Constraint) {
	r := rand.New(rand.NewSource(seed + 1))
	byKind := []ConstraintSet{ConstraintSet{}.With(2).With(3), ConstraintSet{}.With(1).With(3), ConstraintSet{}.With(1)}
	unmet := make([]ConstraintSet, nodes)
	for i := range unmet {
		unmet[i] = byKind[r.Intn(3)]
	}
	cons := make([]Constraint, shapes)
	for i := range cons {
		if r.Intn(3) == 0 {
			cons[i] = Constraint(1 + r.Intn(3))
		}
	}
	return unmet, cons
}

// goldenShapes draws n distinct pod shapes (gpu pods of 1, 2, 4 or 8 cards, some sharing a
// card, and pods without gpu-mem) with their CPU and memory requests, and a popularity each.
func goldenShapes(r *rand.Rand, n int) ([]Shape, []int) {
	perCard := []int64{100, 200, 250, 300, 460, 500, 700, 1000}
	seen := map[shapeKey]bool{}
	var out []Shape
	var pop []int
	for len(out) < n {
		s := Shape{Cards: 1}
		switch v := r.Intn(20); {
		case v < 2:
			s.Cards = 0
		case v < 4:
			s.Cards = 2
		case v < 5:
			s.Cards = 4 << r.Intn(2)
		}
		switch {
		case s.Cards == 0:
		case s.Cards > 1 || r.Intn(3) == 0:
			s.PerCard = 1000
		case r.Intn(4) == 0:
			s.PerCard = 1 + r.Int63n(1000)
		default:
			s.PerCard = perCard[r.Intn(len(perCard))]
		}
		if r.Intn(10) > 0 {
			s.Host.CPUMilli = 1000 * (1 + r.Int63n(24)) * int64(max(s.Cards, 1))
		}
		if r.Intn(10) > 0 {
			s.Host.MemoryMiB = 1024 * (1 + r.Int63n(64)) * int64(max(s.Cards, 1))
		}
		k := shapeKey{cards: s.Cards, perCard: s.PerCard, host: s.Host}
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, s)
		pop = append(pop, 1+600/(len(out)))
	}
	return out, pop
}

// goldenCluster draws the nodes: 8, 4 or 2 cards of 1000 units (now and then an unhealthy
// card), some without cards, some without host accounting (Host nil).
func goldenCluster(r *rand.Rand, n int) []Node {
	nodes := make([]Node, n)
	for i := range nodes {
		node := Node{Name: fmt.Sprintf("n%d", i)}
		cardsPer := []int{8, 8, 8, 4, 2, 0}[r.Intn(6)]
		if r.Intn(40) == 0 {
			cardsPer = 0
		}
		for c := 0; c < cardsPer; c++ {
			node.Cards = append(node.Cards, Card{Index: c, Total: 1000, Healthy: r.Intn(30) > 0})
		}
		if r.Intn(12) > 0 {
			node.Host = &Host{CPUMilli: 32000 * int64(1+r.Intn(3)), MemoryMiB: 262144 * int64(1+r.Intn(2))}
		}
		nodes[i] = node
	}
	return nodes
}

// goldenOptions are replayFGD's variants. constrained adds node constraints
// (goldenConstraints): the workload is weighed by scarcity and a pod is placed only where its
// constraint is met. hostScale, where not 0, gives fgd the cluster's capacity (Capacity) with
// its CPU and memory scaled by it, so that the host pressure crosses fgd's ramp as the
// workload is learned; 0 gives none (each shape's own requests).
type goldenOptions struct {
	constrained bool
	hostScale   float64
}

// goldenPlaced is a pod placed by replayFGD: where, what it holds per card position, its host.
type goldenPlaced struct {
	node  int
	units []int64
	host  Host
}

// replayFGD places steps pods on a cluster of n nodes with fgd, learning the workload pod
// by pod (ShapeCounter, as the extender and the offline replay do), and writes to w every
// Scorer score (with its fit), Place's choice and Score on a fifth of the nodes, the node
// chosen (best score, first on ties, where the host has room) and its allocation. About one
// step in six also removes an earlier pod, so nodes drain as well as fill. It returns the
// number of shapes of the last workload.
func replayFGD(w io.Writer, seed int64, n, steps int, o goldenOptions) int {
	constrained := o.constrained
	r := rand.New(rand.NewSource(seed))
	shapes, pop := goldenShapes(r, 151)
	var total int
	for _, p := range pop {
		total += p
	}
	nodes := goldenCluster(r, n)
	cons := make([]Constraint, len(shapes))
	if constrained {
		var unmet []ConstraintSet
		unmet, cons = goldenConstraints(seed, n, len(shapes))
		for i := range nodes {
			nodes[i].Unmet = unmet[i]
		}
	}
	var counter ShapeCounter
	for i, s := range shapes {
		counter.Add(shapeRequest(s), s.Host, cons[i])
	}
	var capacity Capacity
	if o.hostScale != 0 {
		for _, node := range nodes {
			for _, c := range node.Cards {
				if c.Healthy {
					capacity.Units += c.Total
				}
			}
			if node.Host != nil {
				capacity.Host.CPUMilli += int64(float64(node.Host.CPUMilli) * o.hostScale)
				capacity.Host.MemoryMiB += int64(float64(node.Host.MemoryMiB) * o.hostScale)
			}
		}
	}
	pol := WorkloadAware(newFGD(nil, Capacity{}))
	var placed []goldenPlaced
	var shapeCount int
	scores := make([]float64, n)
	fits := make([]bool, n)
	for step := range steps {
		if len(placed) > 0 && r.Intn(6) == 0 {
			k := r.Intn(len(placed))
			gone := placed[k]
			placed = append(placed[:k], placed[k+1:]...)
			node := &nodes[gone.node]
			for i := range node.Cards {
				node.Cards[i].Used -= gone.units[i]
			}
			if node.Host != nil {
				node.Host.CPUMilli += gone.host.CPUMilli
				node.Host.MemoryMiB += gone.host.MemoryMiB
			}
			fmt.Fprintf(w, "step %d removes a pod of n%d\n", step, gone.node)
		}
		// A pod of a popular shape mostly; now and then a request of several containers.
		v := r.Intn(total)
		si := 0
		for v >= pop[si] {
			v -= pop[si]
			si++
		}
		s := shapes[si]
		req, host, c := shapeRequest(s), s.Host, cons[si]
		// The workload learns the pool's shape, so it keeps exactly 151 shapes (times their
		// constraints).
		counter.Add(req, host, c)
		if r.Intn(15) == 0 {
			req = randomRequest(r)
			for i := range req.Containers {
				req.Containers[i].Units *= 60
			}
		}
		wl := counter.Workload(WorkloadCoverage, WorkloadMaxShapes)
		shapeCount = len(wl)
		if constrained {
			wl = wl.ByScarcity(ReachOf(nodes, 4))
		}
		p := pol.WithWorkload(wl, capacity)
		if step%50 == 0 && o.hostScale != 0 {
			fmt.Fprintf(w, "s%d own %.4f\n", step, p.(fgd).own)
		}
		sc := NewScorer(p, req, host)
		best := -1
		for ni, node := range nodes {
			scores[ni], fits[ni] = sc.Score(node)
			fmt.Fprintf(w, "s%d n%d %v %016x\n", step, ni, fits[ni], math.Float64bits(scores[ni]))
			if ni%5 == step%5 {
				pl, err := p.Place(node, req)
				if err != nil {
					fmt.Fprintf(w, "  place err %v\n", err)
				} else {
					pl.Host = host
					fmt.Fprintf(w, "  place %v %v rate %016x\n", pl.Allocation, pl.Usage, math.Float64bits(p.Score(node, pl)))
				}
			}
			roomy := (node.Host == nil || (node.Host.CPUMilli >= host.CPUMilli && node.Host.MemoryMiB >= host.MemoryMiB)) &&
				!node.Unmet.Has(c)
			if fits[ni] && roomy && (req.IsZero() && len(node.Cards) > 0 || !req.IsZero()) &&
				(best < 0 || scores[ni] > scores[best]) {
				best = ni
			}
		}
		if step%50 == 0 {
			fmt.Fprintf(w, "s%d rank %v\n", step, NormalizeScores(scores, fits))
		}
		if best < 0 {
			fmt.Fprintf(w, "s%d none\n", step)
			continue
		}
		node := &nodes[best]
		pl, err := p.Place(*node, req)
		if err != nil {
			panic(fmt.Sprintf("step %d: Place on n%d fails where the Scorer fits: %v", step, best, err))
		}
		fmt.Fprintf(w, "s%d -> n%d %v\n", step, best, pl.Allocation)
		gp := goldenPlaced{node: best, units: make([]int64, len(node.Cards)), host: host}
		for i := range node.Cards {
			gp.units[i] = pl.Usage[node.Cards[i].Index]
			node.Cards[i].Used += gp.units[i]
		}
		if node.Host != nil {
			node.Host.CPUMilli -= host.CPUMilli
			node.Host.MemoryMiB -= host.MemoryMiB
		}
		placed = append(placed, gp)
	}
	return shapeCount
}

// shapeRequest is a one-container pod of shape s (none for a shape without gpu-mem).
func shapeRequest(s Shape) gpushare.PodRequest {
	if s.Cards == 0 {
		return gpushare.PodRequest{}
	}
	return req(app(0, s.PerCard*int64(s.Cards), s.Cards))
}

package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"math/rand"
	"testing"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// fgdGoldenDigest is the SHA-256 of replayFGD(fgdGoldenSeed): fgd against a workload of 151
// learned shapes on a small cluster whose nodes fill and drain pod after pod, as the
// extender and the offline replay drive it. TestPlacementGoldenDigest's workloads have at
// most four shapes; this one pins fgd where its cost lies (many shapes, many nodes sharing
// a state, weights that change with every pod). Every rate bit, card choice and node choice
// is written: a change here is a change of behaviour, never an optimisation. Re-recorded
// once, for the host cap's half weight (hostCapWeight).
const (
	fgdGoldenSeed   = 11
	fgdGoldenDigest = "82bf2d9ca67dcc129cdd733d4efcd448c1399d615bd6e3b6ee9d228919bf7d73"
)

func TestFGDGoldenDigest(t *testing.T) {
	h := sha256.New()
	shapes := replayFGD(h, fgdGoldenSeed, 100, 900)
	if shapes != 151 {
		t.Fatalf("workload has %d shapes, want 151", shapes)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != fgdGoldenDigest {
		t.Errorf("digest of fgd's rates and choices = %s, want %s", got, fgdGoldenDigest)
	}
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

// goldenPlaced is a pod placed by replayFGD: where, what it holds per card position, its host.
type goldenPlaced struct {
	node  int
	units []int64
	host  Host
}

// replayFGD places steps pods on a cluster of n nodes with fgd, learning the workload pod
// by pod (ShapeCounter, as the extender and the offline replay do), and writes to w every
// Scorer rate (with its fit), Place's choice and Rate on a fifth of the nodes, the node
// chosen (best rate, first on ties, where the host has room) and its allocation. About one
// step in six also removes an earlier pod, so nodes drain as well as fill. It returns the
// number of shapes of the last workload.
func replayFGD(w io.Writer, seed int64, n, steps int) int {
	r := rand.New(rand.NewSource(seed))
	shapes, pop := goldenShapes(r, 151)
	var total int
	for _, p := range pop {
		total += p
	}
	nodes := goldenCluster(r, n)
	var counter ShapeCounter
	for _, s := range shapes {
		counter.Add(shapeRequest(s), s.Host, 0)
	}
	pol := WorkloadAware(newFGD(nil))
	var placed []goldenPlaced
	var shapeCount int
	rates := make([]float64, n)
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
		req, host := shapeRequest(s), s.Host
		// The workload learns the pool's shape, so it keeps exactly 151 shapes.
		counter.Add(req, host, 0)
		if r.Intn(15) == 0 {
			req = randomRequest(r)
			for i := range req.Containers {
				req.Containers[i].Units *= 60
			}
		}
		wl := counter.Workload(WorkloadCoverage, WorkloadMaxShapes)
		shapeCount = len(wl)
		p := pol.WithWorkload(wl)
		sc := NewScorer(p, req, host)
		best := -1
		for ni, node := range nodes {
			rates[ni], fits[ni] = sc.Rate(node)
			fmt.Fprintf(w, "s%d n%d %v %016x\n", step, ni, fits[ni], math.Float64bits(rates[ni]))
			if ni%5 == step%5 {
				pl, err := p.Place(node, req)
				if err != nil {
					fmt.Fprintf(w, "  place err %v\n", err)
				} else {
					pl.Host = host
					fmt.Fprintf(w, "  place %v %v rate %016x\n", pl.Allocation, pl.Usage, math.Float64bits(p.Rate(node, pl)))
				}
			}
			roomy := node.Host == nil || (node.Host.CPUMilli >= host.CPUMilli && node.Host.MemoryMiB >= host.MemoryMiB)
			if fits[ni] && roomy && (req.IsZero() && len(node.Cards) > 0 || !req.IsZero()) &&
				(best < 0 || rates[ni] > rates[best]) {
				best = ni
			}
		}
		if step%50 == 0 {
			fmt.Fprintf(w, "s%d rank %v\n", step, Rank(rates, fits))
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

package policy

import (
	"math/rand"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// The generators below draw the nodes, pod requests and workloads of the property tests from
// a seeded math/rand source, whose sequence is stable across Go releases: the same seed gives
// the same corpus, so a golden digest of the results pins the policies' behaviour.

// randomNode draws a node of 0..16 cards (none in about 1 of 50) with ascending, distinct,
// sometimes gapped NVML indexes; cards are of mixed sizes, some unhealthy, some over-committed
// (a card that shrank under its pods), some of zero size. withHost adds free CPU and memory.
func randomNode(r *rand.Rand, withHost bool) Node {
	n := Node{Name: "n"}
	if r.Intn(50) > 0 {
		sizes := []int64{0, 8, 14, 16, 16, 16, 24, 80}
		idx := r.Intn(3)
		for k := 1 + r.Intn(16); k > 0; k-- {
			total := sizes[r.Intn(len(sizes))]
			used := r.Int63n(total + 3) // up to total+2: over-committed now and then
			if r.Intn(3) == 0 {
				used = 0
			}
			n.Cards = append(n.Cards, Card{Index: idx, Total: total, Used: used, Healthy: r.Intn(8) > 0})
			idx += 1 + r.Intn(2)
		}
	}
	if withHost {
		n.Host = &Host{CPUMilli: r.Int63n(64000), MemoryMiB: r.Int63n(256 << 10)}
	}
	return n
}

// randomRequest draws a valid pod request: mostly one app container, else up to five of
// mixed kinds (app, init, sidecar), some spanning several cards; none in about 1 of 25.
func randomRequest(r *rand.Rand) gpushare.PodRequest {
	if r.Intn(25) == 0 {
		return gpushare.PodRequest{}
	}
	n := 1
	if r.Intn(10) < 3 {
		n = 2 + r.Intn(4)
	}
	var req gpushare.PodRequest
	apps, inits := 0, 0
	for k := 0; k < n; k++ {
		c := gpushare.ContainerRequest{Cards: 1}
		switch v := r.Intn(10); {
		case n > 1 && v < 2:
			c.Kind = gpushare.Init
		case n > 1 && v < 4:
			c.Kind = gpushare.Sidecar
		}
		if r.Intn(5) == 0 {
			c.Cards = 2 + r.Intn(3)
		}
		c.Units = (1 + r.Int63n(16)) * int64(c.Cards)
		if c.Kind == gpushare.App {
			c.Ref, c.Name = gpushare.ContainerRef{Index: apps}, "app"
			apps++
		} else {
			c.Ref, c.Name = gpushare.ContainerRef{InitList: true, Index: inits}, "init"
			inits++
		}
		req.Containers = append(req.Containers, c)
	}
	// PodRequest lists init containers (in spec order) before app containers.
	ordered := make([]gpushare.ContainerRequest, 0, n)
	for _, pass := range []bool{true, false} {
		for _, c := range req.Containers {
			if c.Ref.InitList == pass {
				ordered = append(ordered, c)
			}
		}
	}
	req.Containers = ordered
	return req
}

// randomHost draws a pod's CPU and memory request.
func randomHost(r *rand.Rand) Host {
	return Host{CPUMilli: r.Int63n(16000), MemoryMiB: r.Int63n(64 << 10)}
}

// randomWorkload draws 1..4 typical shapes (some without gpu-mem) whose weights sum to 1.
func randomWorkload(r *rand.Rand) Workload {
	w := make(Workload, 1+r.Intn(4))
	var sum float64
	for i := range w {
		w[i] = Shape{Cards: r.Intn(3), PerCard: 1 + r.Int63n(16), Host: randomHost(r), Weight: 1 + r.Float64()}
		sum += w[i].Weight
	}
	for i := range w {
		w[i].Weight /= sum
	}
	return w
}

// group is one pod request scored on several nodes, as in one prioritize call, and the
// workload fgd is given for it.
type group struct {
	req   gpushare.PodRequest
	host  Host
	nodes []Node
	w     Workload
}

// corpus draws n groups of perGroup nodes each, half of the nodes with free host resources.
func corpus(seed int64, n, perGroup int) []group {
	r := rand.New(rand.NewSource(seed))
	out := make([]group, n)
	for i := range out {
		g := group{req: randomRequest(r), host: randomHost(r), w: randomWorkload(r)}
		for k := 0; k < perGroup; k++ {
			g.nodes = append(g.nodes, randomNode(r, r.Intn(2) == 0))
		}
		out[i] = g
	}
	return out
}

// policiesFor returns every registered policy, by name, for group g; a workload-aware one
// appears twice: without a workload ("fgd", binpack's order) and with g's ("fgd+w").
func policiesFor(g group) ([]string, []Policy) {
	var names []string
	var pols []Policy
	for _, name := range Names() {
		pol, err := New(name)
		if err != nil {
			panic(err)
		}
		names, pols = append(names, name), append(pols, pol)
		if wa, ok := pol.(WorkloadAware); ok {
			names, pols = append(names, name+"+w"), append(pols, wa.WithWorkload(g.w, Capacity{}))
		}
	}
	return names, pols
}

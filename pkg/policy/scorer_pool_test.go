package policy

import (
	"math"
	"math/rand"
	"testing"
)

// TestScorerPoolMatchesNewScorers: Scorers taken from a pool, put back and taken again for
// other pods, policies and workloads (fgd with its memo and host caps, binpack, spread,
// FirstFit's cards) answer bit for bit what new Scorers answer: nothing of an earlier pod
// is used again.
func TestScorerPoolMatchesNewScorers(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	var pool ScorerPool
	plain := make(map[string]Policy)
	for _, name := range []string{"binpack", "spread"} {
		p, err := New(name)
		if err != nil {
			t.Fatalf("policy %s: %v", name, err)
		}
		plain[name] = p
	}
	nodes := make([]Node, 6)
	for i := range nodes {
		nodes[i] = randomNode(r, r.Intn(2) == 0)
	}
	for g := range 300 {
		var pol Policy
		switch g % 4 {
		case 0, 1:
			var w Workload
			for len(w) == 0 {
				w = randomWorkload(r)
			}
			pol = newFGD(w, Capacity{})
		case 2:
			pol = plain["binpack"]
		default:
			pol = plain["spread"]
		}
		rq, host := randomRequest(r), randomHost(r)
		firstFit := r.Intn(3) == 0
		sc, want := pool.Get(pol, rq, host), NewScorer(pol, rq, host)
		if firstFit {
			sc, want = pool.GetFirstFit(pol, rq, host), NewFirstFitScorer(pol, rq, host)
		}
		for k := range 20 {
			node := nodes[r.Intn(len(nodes))]
			got, gotOK := sc.Score(node)
			exp, expOK := want.Score(node)
			if gotOK != expOK || math.Float64bits(got) != math.Float64bits(exp) {
				t.Fatalf("pod %d (%T, first fit %v) node %d: pooled %v %v, new %v %v", g, pol, firstFit, k, got, gotOK, exp, expOK)
			}
		}
		pool.Put(sc)
		if r.Intn(10) == 0 {
			nodes[r.Intn(len(nodes))] = randomNode(r, r.Intn(2) == 0)
		}
	}
}

// TestScoreMemoReset: a reset memo finds nothing it held, keeps its storage, and allocates
// nothing while it refills to its earlier size.
func TestScoreMemoReset(t *testing.T) {
	var m scoreMemo
	nodes := make([]Node, 500)
	for i := range nodes {
		nodes[i] = Node{Cards: cards(16, int64(i%16), 16, int64(i/16))}
	}
	fill := func() {
		for i, n := range nodes {
			_, _, _, h := m.lookup(n)
			m.store(h, n, float64(i), true)
		}
	}
	fill()
	m.reset()
	if _, _, found, _ := m.lookup(Node{Cards: cards(16, 0, 16, 0)}); found {
		t.Fatal("a reset memo still finds a node")
	}
	if allocs := testing.AllocsPerRun(10, func() { m.reset(); fill() }); allocs != 0 {
		t.Errorf("refilling a reset memo allocated %v times", allocs)
	}
}

package policy

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// placeAndScore is the Scorer's answer through the Policy interface: Place, then Score of the
// placement with the pod's host request.
func placeAndScore(pol Policy, node Node, req gpushare.PodRequest, host Host) (Placement, float64, bool) {
	p := Placement{Usage: gpushare.CardUnits{}}
	if !req.IsZero() {
		var err error
		if p, err = pol.Place(node, req); err != nil {
			return Placement{}, 0, false
		}
	}
	p.Host = host
	return p, pol.Score(node, p), true
}

// sameScore is exact equality of the bits, stricter than == (it tells -0 from +0).
func sameScore(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

func TestScorerMatchesPlaceAndScore(t *testing.T) {
	// fgd's workload: one card of 6 units and 8 cores.
	w := Workload{{Cards: 1, PerCard: 6, Host: Host{CPUMilli: 8000}, Weight: 1}}
	host := &Host{CPUMilli: 10000, MemoryMiB: 1 << 16}
	sick := cards(16, 0, 16, 4)
	sick[0].Healthy = false
	tests := []struct {
		name   string
		node   Node
		req    gpushare.PodRequest
		host   Host
		wantOK bool
	}{
		{name: "one card", node: Node{Cards: cards(16, 6, 16, 12, 16, 10)}, req: req(app(0, 4, 1)), wantOK: true},
		{name: "no card has 10", node: Node{Cards: cards(16, 8, 16, 8)}, req: req(app(0, 10, 1))},
		{name: "two cards", node: Node{Cards: cards(16, 6, 16, 12, 16, 8)}, req: req(app(0, 16, 2)), wantOK: true},
		{name: "containers share a card", node: Node{Cards: cards(16, 6, 16, 0)}, req: req(app(0, 4, 1), app(1, 6, 1)), wantOK: true},
		{
			name: "init reuses what the pod holds", node: Node{Cards: cards(16, 0, 16, 0)},
			req: req(initC(0, 10, gpushare.Init), app(0, 4, 1)), wantOK: true,
		},
		{
			name: "sidecar beside inits and apps", node: Node{Cards: cards(16, 0), Host: host},
			req: req(initC(0, 2, gpushare.Sidecar), initC(1, 8, gpushare.Init), app(0, 3, 1)), host: Host{CPUMilli: 4000}, wantOK: true,
		},
		{name: "unhealthy card", node: Node{Cards: sick}, req: req(app(0, 8, 2))},
		{name: "over-committed card", node: Node{Cards: cards(8, 12, 16, 0)}, req: req(app(0, 4, 1)), wantOK: true},
		{name: "no cards", node: Node{}, req: req(app(0, 1, 1))},
		{name: "pod without gpu-mem on a node without cards", node: Node{Host: host}, host: Host{CPUMilli: 4000}, wantOK: true},
		{name: "pod without gpu-mem", node: Node{Cards: cards(16, 6), Host: host}, host: Host{CPUMilli: 4000}, wantOK: true},
	}
	for _, tc := range tests {
		for _, name := range Names() {
			pol, _ := New(name)
			pols := []Policy{pol}
			if wa, ok := pol.(WorkloadAware); ok {
				pols = append(pols, wa.WithWorkload(w, Capacity{}))
			}
			for _, pol := range pols {
				t.Run(tc.name+"/"+name, func(t *testing.T) {
					_, want, wantOK := placeAndScore(pol, tc.node, tc.req, tc.host)
					got, ok := NewScorer(pol, tc.req, tc.host).Score(tc.node)
					if ok != tc.wantOK || wantOK != tc.wantOK {
						t.Fatalf("fits: Scorer %v, Place %v, want %v", ok, wantOK, tc.wantOK)
					}
					if !sameScore(got, want) {
						t.Errorf("score: Scorer %v, Place+Score %v", got, want)
					}
				})
			}
		}
	}
}

// foreign stands for a policy defined outside this package: the Scorer knows no scoreUsage
// for it and goes through Place and Score.
type foreign struct{ Policy }

// TestScorerMatchesPlaceAndScoreRandom holds the Scorer to Place+Score on 2000 random nodes
// (0..16 cards, mixed sizes, unhealthy and over-committed cards, half with host resources)
// for random pods (several containers of every kind, multi-card containers, no gpu-mem),
// for every registered policy, fgd with and without a workload, and for policies it does
// not know. One Scorer serves each pod's ten nodes of varying sizes, as in a prioritize
// call, so its reused buffers are exercised. NormalizeScores over all nodes must equal
// NormalizeScores over the fitting nodes' placements.
func TestScorerMatchesPlaceAndScoreRandom(t *testing.T) {
	var fits, misses, multi, inits, fellBack int
	for gi, g := range corpus(11, 200, 10) {
		names, pols := policiesFor(g)
		for pi, pol := range pols {
			names = append(names, names[pi]+"/foreign")
			pols = append(pols, foreign{pol})
		}
		for pi, pol := range pols {
			sc := NewScorer(pol, g.req, g.host)
			scores, ok := make([]float64, len(g.nodes)), make([]bool, len(g.nodes))
			var fitNodes []Node
			var fitPlacements []Placement
			for ni, node := range g.nodes {
				p, want, wantOK := placeAndScore(pol, node, g.req, g.host)
				scores[ni], ok[ni] = sc.Score(node)
				if ok[ni] != wantOK {
					t.Fatalf("%s group %d node %d: Scorer fits %v, Place %v\nnode %+v\nreq %+v", names[pi], gi, ni, ok[ni], wantOK, node, g.req)
				}
				if !sameScore(scores[ni], want) {
					t.Fatalf("%s group %d node %d: Scorer score %v, Place+Score %v\nnode %+v\nreq %+v", names[pi], gi, ni, scores[ni], want, node, g.req)
				}
				if wantOK {
					fitNodes, fitPlacements = append(fitNodes, node), append(fitPlacements, p)
				}
				if pi == 0 { // the fit answer is every policy's
					fits, misses, multi, inits, fellBack = count(node, g.req, wantOK, fits, misses, multi, inits, fellBack)
				}
			}
			want := make([]int64, len(g.nodes))
			fitNormalized := normalizedScores(pol, fitNodes, fitPlacements)
			for ni := range g.nodes {
				if ok[ni] {
					want[ni], fitNormalized = fitNormalized[0], fitNormalized[1:]
				}
			}
			if diff := cmp.Diff(want, NormalizeScores(scores, ok)); diff != "" {
				t.Fatalf("%s group %d: NormalizeScores (-fitting nodes only,+all nodes):\n%s", names[pi], gi, diff)
			}
		}
	}
	t.Logf("%d fit, %d do not; %d fit with several containers, %d with init containers; spread fell back to best fit %d times",
		fits, misses, multi, inits, fellBack)
	if fits == 0 || misses == 0 || multi == 0 || inits == 0 || fellBack == 0 {
		t.Error("the corpus no longer covers every path")
	}
}

// count tallies which paths the corpus takes, so the property test notices when a change of
// the generators stops covering one.
func count(node Node, req gpushare.PodRequest, ok bool, fits, misses, multi, inits, fellBack int) (int, int, int, int, int) {
	if !ok {
		return fits, misses + 1, multi, inits, fellBack
	}
	fits++
	if len(req.Containers) > 1 {
		multi++
	}
	for _, c := range req.Containers {
		if c.Kind == gpushare.Init {
			inits++
			break
		}
	}
	if len(node.Cards) > 0 && !req.IsZero() {
		var s scratch
		if !s.fill(node, req, chooseMostFree) {
			fellBack++
		}
	}
	return fits, misses, multi, inits, fellBack
}

// TestScorerAllocatesNothing: after the first node, scoring more nodes allocates nothing,
// whatever the pod's shape, for every registered policy.
func TestScorerAllocatesNothing(t *testing.T) {
	w := Workload{{Cards: 1, PerCard: 6, Host: Host{CPUMilli: 8000}, Weight: 0.5}, {Cards: 2, PerCard: 4, Weight: 0.5}}
	host := &Host{CPUMilli: 64000, MemoryMiB: 1 << 18}
	nodes := []Node{
		{Cards: cards(16, 6, 16, 12, 16, 0, 16, 3, 16, 9, 16, 1, 16, 0, 16, 15), Host: host},
		{Cards: cards(80, 20, 80, 0)},
		{Cards: cards(14, 0, 14, 2, 14, 4, 14, 6, 14, 8, 14, 10, 14, 12, 14, 14, 14, 0, 14, 1, 14, 3, 14, 5, 14, 7, 14, 9, 14, 11, 14, 13), Host: host},
	}
	reqs := map[string]gpushare.PodRequest{
		"one card":  req(app(0, 4, 1)),
		"two cards": req(app(0, 8, 2)),
		"mixed":     req(initC(0, 2, gpushare.Sidecar), initC(1, 8, gpushare.Init), app(0, 6, 2), app(1, 3, 1)),
		"no gpu":    {},
	}
	for _, name := range Names() {
		pol, _ := New(name)
		if wa, ok := pol.(WorkloadAware); ok {
			pol = wa.WithWorkload(w, Capacity{})
		}
		for rname, r := range reqs {
			sc := NewScorer(pol, r, Host{CPUMilli: 1000})
			for _, n := range nodes {
				sc.Score(n) // grows the buffers
			}
			allocs := testing.AllocsPerRun(20, func() {
				for _, n := range nodes {
					sc.Score(n)
				}
			})
			if allocs != 0 {
				t.Errorf("%s, %s: %v allocations per %d nodes, want 0", name, rname, allocs, len(nodes))
			}
		}
	}
}

// firstFitAndScore is NewFirstFitScorer's answer through the public API: FirstFit, then the
// policy's Score of that placement with the pod's host request.
func firstFitAndScore(pol Policy, node Node, req gpushare.PodRequest, host Host) (float64, bool) {
	p := Placement{Usage: gpushare.CardUnits{}}
	if !req.IsZero() {
		var err error
		if p, err = FirstFit(node, req); err != nil {
			return 0, false
		}
	}
	p.Host = host
	return pol.Score(node, p), true
}

// TestFirstFitScorerMatchesFirstFitAndScore holds NewFirstFitScorer to FirstFit+Score on
// the random corpus of TestScorerMatchesPlaceAndScoreRandom, for every registered policy,
// fgd with and without a workload (its memo on), and policies it does not know. Each
// group's nodes are scored twice by one Scorer, so the second pass reads fgd's memo.
func TestFirstFitScorerMatchesFirstFitAndScore(t *testing.T) {
	var fits, misses int
	for gi, g := range corpus(13, 200, 10) {
		names, pols := policiesFor(g)
		for pi, pol := range pols {
			names = append(names, names[pi]+"/foreign")
			pols = append(pols, foreign{pol})
		}
		for pi, pol := range pols {
			sc := NewFirstFitScorer(pol, g.req, g.host)
			for pass := range 2 {
				for ni, node := range g.nodes {
					want, wantOK := firstFitAndScore(pol, node, g.req, g.host)
					got, ok := sc.Score(node)
					if ok != wantOK || !sameScore(got, want) {
						t.Fatalf("%s group %d node %d pass %d: Scorer %v %v, FirstFit+Score %v %v\nnode %+v\nreq %+v",
							names[pi], gi, ni, pass, got, ok, want, wantOK, node, g.req)
					}
					if pi == 0 && pass == 0 {
						if wantOK {
							fits++
						} else {
							misses++
						}
					}
				}
			}
		}
	}
	if fits == 0 || misses == 0 {
		t.Errorf("the corpus no longer covers both answers: %d fit, %d do not", fits, misses)
	}
}

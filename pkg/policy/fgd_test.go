package policy

import (
	"math"
	"math/rand"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

func TestShapeCounterWorkload(t *testing.T) {
	var sc ShapeCounter
	small := Host{CPUMilli: 4000, MemoryMiB: 8192}
	for i := 0; i < 6; i++ {
		sc.Add(req(app(0, 500, 1)), small, 0)
	}
	for i := 0; i < 3; i++ {
		sc.Add(req(app(0, 2000, 2)), small, 0)
	}
	sc.Add(gpushare.PodRequest{}, Host{CPUMilli: 1000}, 0) // a pod without gpu-mem
	if sc.Total() != 10 {
		t.Fatalf("Total = %d, want 10", sc.Total())
	}
	// 90 % coverage: 6 + 3 = 9 of 10 pods → two shapes, renormalised 6/9 and 3/9.
	want := Workload{
		{Cards: 1, PerCard: 500, Host: small, Weight: 6.0 / 9},
		{Cards: 2, PerCard: 1000, Host: small, Weight: 3.0 / 9},
	}
	if diff := cmp.Diff(want, sc.Workload(0.9, 10)); diff != "" {
		t.Errorf("Workload (-want,+got):\n%s", diff)
	}
	if got := sc.Workload(1, 1); len(got) != 1 || got[0].Weight != 1 {
		t.Errorf("max 1 shape: %+v", got)
	}
	var empty ShapeCounter
	if empty.Workload(0.95, 10) != nil {
		t.Error("empty counter has a workload")
	}
}

func TestFGDCardChoice(t *testing.T) {
	// Typical pods want 600 units on one card. Free: card0 700, card1 1000.
	// A 300-unit pod on card0 leaves free 400 and 1000: card0 is unusable for 600 → F = 400.
	// On card1 it leaves 700 and 700, both usable → F = 0. fgd picks card1; best fit picks
	// card0.
	w := Workload{{Cards: 1, PerCard: 600, Weight: 1}}
	node := Node{Cards: []Card{{Index: 0, Total: 1000, Used: 300, Healthy: true}, {Index: 1, Total: 1000, Healthy: true}}}
	p, err := newFGD(w, Capacity{}).Place(node, req(app(0, 300, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(gpushare.CardUnits{1: 300}, p.Usage); diff != "" {
		t.Errorf("fgd usage (-want,+got):\n%s", diff)
	}
	bp, _ := New("binpack")
	p, _ = bp.Place(node, req(app(0, 300, 1)))
	if diff := cmp.Diff(gpushare.CardUnits{0: 300}, p.Usage); diff != "" {
		t.Errorf("binpack usage (-want,+got):\n%s", diff)
	}
}

func TestFGDScoreHostAware(t *testing.T) {
	// Typical gpu pods want one whole card (1000) and 8 cores. Two nodes with one free card:
	// node a has 10 cores free, node b 40. A pod without gpu-mem asking 4 cores on node a
	// leaves 6 < 8 cores: a's free card is stranded (ΔF = +1000); on b nothing changes.
	w := Workload{{Cards: 1, PerCard: 1000, Host: Host{CPUMilli: 8000}, Weight: 1}}
	pol := newFGD(w, Capacity{})
	card := []Card{{Index: 0, Total: 1000, Healthy: true}}
	a := Node{Name: "a", Cards: card, Host: &Host{CPUMilli: 10000, MemoryMiB: 1 << 20}}
	b := Node{Name: "b", Cards: card, Host: &Host{CPUMilli: 40000, MemoryMiB: 1 << 20}}
	cpuPod := Placement{Usage: gpushare.CardUnits{}, Host: Host{CPUMilli: 4000}}
	got := normalizedScores(pol, []Node{a, b}, []Placement{cpuPod, cpuPod})
	if diff := cmp.Diff([]int64{0, maxScore}, got); diff != "" {
		t.Errorf("scores (-want,+got):\n%s", diff)
	}
	// Without host accounting both look the same: tie, both best.
	a.Host, b.Host = nil, nil
	got = normalizedScores(pol, []Node{a, b}, []Placement{cpuPod, cpuPod})
	if diff := cmp.Diff([]int64{maxScore, maxScore}, got); diff != "" {
		t.Errorf("scores without host (-want,+got):\n%s", diff)
	}
}

func TestFGDPodsWithoutGPUPreferSpentNodes(t *testing.T) {
	// No typical shape is affected by CPU here (ample cores), so ΔF = 0 everywhere and the
	// tie-breaker sends the pod to the node whose cards are most used.
	w := Workload{{Cards: 1, PerCard: 500, Weight: 1}}
	pol := newFGD(w, Capacity{})
	host := &Host{CPUMilli: 64000, MemoryMiB: 1 << 20}
	full := Node{Cards: []Card{{Index: 0, Total: 1000, Used: 1000, Healthy: true}}, Host: host}
	empty := Node{Cards: []Card{{Index: 0, Total: 1000, Healthy: true}}, Host: host}
	p := Placement{Usage: gpushare.CardUnits{}, Host: Host{CPUMilli: 1000}}
	if diff := cmp.Diff([]int64{maxScore, 0}, normalizedScores(pol, []Node{full, empty}, []Placement{p, p})); diff != "" {
		t.Errorf("scores (-want,+got):\n%s", diff)
	}
}

func TestNormalizeScores(t *testing.T) {
	// binpack scores: .75·card + .25·node fullness after placing 4 units.
	// n0: 12/16 → .75  → best → 10
	// n1: 4/16 on an empty 2×16 node → .1875+.03125 = .21875 → lowest → 0
	// n2: 8/16, node 8/16 → .5 → 9·(.5-.21875)/(.75-.21875) = 4.76 → 4
	nodes := []Node{
		{Cards: cards(16, 8)},
		{Cards: cards(16, 0, 16, 0)},
		{Cards: cards(16, 4)},
	}
	p := Placement{Usage: gpushare.CardUnits{0: 4}}
	bp, _ := New("binpack")
	if diff := cmp.Diff([]int64{10, 0, 4}, normalizedScores(bp, nodes, []Placement{p, p, p})); diff != "" {
		t.Errorf("scores (-want,+got):\n%s", diff)
	}
}

func TestBestfitPrefersLeastLeftover(t *testing.T) {
	// Absolute free units after placing 4: small node 14-4 = 10 free, big node 80-40-4 = 36.
	// bestfit prefers the small node though the big one is fuller by ratio (binpack's pick).
	small := Node{Cards: []Card{{Index: 0, Total: 14, Healthy: true}}}
	big := Node{Cards: []Card{{Index: 0, Total: 80, Used: 40, Healthy: true}}}
	p := Placement{Usage: gpushare.CardUnits{0: 4}}
	bf, _ := New("bestfit")
	if diff := cmp.Diff([]int64{10, 0}, normalizedScores(bf, []Node{small, big}, []Placement{p, p})); diff != "" {
		t.Errorf("bestfit (-want,+got):\n%s", diff)
	}
	bp, _ := New("binpack")
	if diff := cmp.Diff([]int64{0, 10}, normalizedScores(bp, []Node{small, big}, []Placement{p, p})); diff != "" {
		t.Errorf("binpack (-want,+got):\n%s", diff)
	}
}

func TestFitAgreesWithEveryPolicy(t *testing.T) {
	node := Node{Cards: cards(16, 10, 16, 4, 16, 12)}
	w := Workload{{Cards: 1, PerCard: 6, Weight: 1}}
	reqs := []gpushare.PodRequest{
		req(app(0, 6, 1)), req(app(0, 13, 1)), req(app(0, 8, 2)), req(app(0, 12, 1), app(1, 4, 1)),
	}
	for _, name := range Names() {
		pol, _ := New(name)
		if wa, ok := pol.(WorkloadAware); ok {
			pol = wa.WithWorkload(w, Capacity{})
		}
		for i, r := range reqs {
			_, perr := pol.Place(node, r)
			ferr := fit(node, r)
			if (perr == nil) != (ferr == nil) {
				t.Errorf("%s req %d: Place err %v, Fit err %v", name, i, perr, ferr)
			}
		}
	}
}

func TestFGDHostCap(t *testing.T) {
	// One typical shape: a whole card and 10 cores. Four free cards.
	w := Workload{{Cards: 1, PerCard: 1000, Host: Host{CPUMilli: 10000}, Weight: 1}}
	f := newFGD(w, Capacity{})
	free := []int64{1000, 1000, 1000, 1000}
	for _, tc := range []struct {
		name string
		host *Host
		want float64 // F: free units the shape cannot use, those the host cap strands at hostCapWeight
	}{
		{"host unknown: cards alone", nil, 0},
		{"CPU for all four", &Host{CPUMilli: 40000, MemoryMiB: 1}, 0},
		{"CPU for two: two cards stranded by the host, at half weight", &Host{CPUMilli: 25000, MemoryMiB: 1}, 2000 * hostCapWeight},
		{"CPU for none: all stranded, at full weight (the paper's rule)", &Host{CPUMilli: 9000, MemoryMiB: 1}, 4000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s scratch
			if got := f.frag(free, tc.host != nil, f.caps(tc.host, free, &s), nil, &s); got != tc.want {
				t.Errorf("frag = %v, want %v", got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name  string
		shape Shape
		host  Host
		want  int64
	}{
		{"cpu bound", Shape{Cards: 2, PerCard: 500, Host: Host{CPUMilli: 4000, MemoryMiB: 100}}, Host{CPUMilli: 9000, MemoryMiB: 1000}, 2 * 2 * 500},
		{"memory bound", Shape{Cards: 1, PerCard: 300, Host: Host{CPUMilli: 1000, MemoryMiB: 400}}, Host{CPUMilli: 9000, MemoryMiB: 1000}, 2 * 300},
		{"no host request: unlimited", Shape{Cards: 1, PerCard: 300}, Host{}, 1 << 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := hostFeeds(tc.host, tc.shape); got != tc.want {
				t.Errorf("hostFeeds = %d, want %d", got, tc.want)
			}
		})
	}

	// A pod without gpu-mem taking 6 cores: on a (25 → 19 cores) the shape's pods the host
	// can feed drop from 2 to 1 and on b (45 → 39) from 4 to 3, each stranding one more card;
	// on c (51 → 45) four are still fed. Without the cap all three would tie.
	cards := func() []Card {
		return []Card{{Index: 0, Total: 1000, Healthy: true}, {Index: 1, Total: 1000, Healthy: true},
			{Index: 2, Total: 1000, Healthy: true}, {Index: 3, Total: 1000, Healthy: true}}
	}
	a := Node{Name: "a", Cards: cards(), Host: &Host{CPUMilli: 25000, MemoryMiB: 1 << 20}}
	b := Node{Name: "b", Cards: cards(), Host: &Host{CPUMilli: 45000, MemoryMiB: 1 << 20}}
	cpuPod := Placement{Usage: gpushare.CardUnits{}, Host: Host{CPUMilli: 6000}}
	c := Node{Name: "c", Cards: cards(), Host: &Host{CPUMilli: 51000, MemoryMiB: 1 << 20}}
	got := normalizedScores(f, []Node{a, b, c}, []Placement{cpuPod, cpuPod, cpuPod})
	if got[2] != maxScore || got[0] == maxScore || got[1] == maxScore {
		t.Errorf("scores a, b, c = %v: want c (CPU to spare beyond its cards) best", got)
	}
}

// feedsAtLeast is caps' division-free test that the host cap cannot bind for sh: podsFor
// pods of the shape use most units, and the host holds them.
func feedsAtLeast(sh Shape, host Host, most int64) bool {
	g := newFGD(Workload{sh}, Capacity{}).groups[0]
	k := podsFor(most, g.perPod, g.invPerPod)
	return k > 0 && hostHolds(host, sh.Host, k)
}

// TestFGDFeedsAtLeast: the division-free test of the host cap agrees with hostFeeds within
// its bounds and declines outside them.
func TestFGDFeedsAtLeast(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shape Shape
		host  Host
		most  int64
		want  bool
	}{
		{"exactly enough", Shape{Cards: 1, PerCard: 1000, Host: Host{CPUMilli: 12000}}, Host{CPUMilli: 96000, MemoryMiB: 1}, 8000, true},
		{"one pod short", Shape{Cards: 1, PerCard: 1000, Host: Host{CPUMilli: 12000}}, Host{CPUMilli: 95999, MemoryMiB: 1}, 8000, false},
		{"rounded up", Shape{Cards: 2, PerCard: 300, Host: Host{MemoryMiB: 10}}, Host{MemoryMiB: 20}, 1201, false},
		{"rounded up, enough", Shape{Cards: 2, PerCard: 300, Host: Host{MemoryMiB: 10}}, Host{MemoryMiB: 30}, 1201, true},
		{"memory binds", Shape{Cards: 1, PerCard: 500, Host: Host{CPUMilli: 1, MemoryMiB: 100}}, Host{CPUMilli: 1 << 40, MemoryMiB: 399}, 2000, false},
		{"no host request: left to hostFeeds", Shape{Cards: 1, PerCard: 500}, Host{}, 10, false},
		{"huge request: no overflow", Shape{Cards: 1, PerCard: 1, Host: Host{CPUMilli: math.MaxInt64}}, Host{CPUMilli: math.MaxInt64, MemoryMiB: 1}, 2, false},
		{"most above 1<<40: left to hostFeeds", Shape{Cards: 1, PerCard: 1, Host: Host{CPUMilli: 1}}, Host{CPUMilli: math.MaxInt64}, 1<<40 + 1, false},
		{"pod of 1<<23 units: left to hostFeeds", Shape{Cards: 1, PerCard: 1 << 23, Host: Host{CPUMilli: 1}}, Host{CPUMilli: 1 << 20}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := feedsAtLeast(tc.shape, tc.host, tc.most); got != tc.want {
				t.Errorf("feedsAtLeast = %v, want %v (hostFeeds %d)", got, tc.want, hostFeeds(tc.host, tc.shape))
			}
		})
	}
	r := rand.New(rand.NewSource(5))
	for range 100000 {
		sh := Shape{Cards: 1 + r.Intn(8), PerCard: 1 + r.Int63n(2000)}
		if r.Intn(4) > 0 {
			sh.Host.CPUMilli = r.Int63n(40000)
		}
		if r.Intn(4) > 0 {
			sh.Host.MemoryMiB = r.Int63n(1 << 17)
		}
		host := Host{CPUMilli: sh.Host.CPUMilli + r.Int63n(200000), MemoryMiB: sh.Host.MemoryMiB + r.Int63n(1<<20)}
		most := 1 + r.Int63n(20000)
		got, feeds := feedsAtLeast(sh, host, most), hostFeeds(host, sh)
		if got && feeds < most || !got && feeds >= most && (sh.Host.CPUMilli > 0 || sh.Host.MemoryMiB > 0) {
			t.Fatalf("shape %+v host %+v most %d: feedsAtLeast %v, hostFeeds %d", sh, host, most, got, feeds)
		}
	}
}

// TestFGDFeedsMatchesHostFeeds: caps' division-free host cap is hostFeeds, including at the
// edges of its bounds (where it hands over to hostFeeds).
func TestFGDFeedsMatchesHostFeeds(t *testing.T) {
	edge := []int64{0, 1, 2, 3, 7, 999, 1000, 1001, 1 << 22, 1<<23 - 1, 1 << 23, 1<<40 - 1, 1 << 40, 1<<52 - 1, 1 << 52, math.MaxInt64}
	r := rand.New(rand.NewSource(9))
	pick := func() int64 {
		if r.Intn(3) == 0 {
			return edge[r.Intn(len(edge))]
		}
		return r.Int63n(1 << uint(1+r.Intn(55)))
	}
	for range 200000 {
		sh := Shape{Cards: 1 + r.Intn(8), PerCard: 1 + r.Int63n(1<<uint(1+r.Intn(24))), Host: Host{CPUMilli: pick(), MemoryMiB: pick()}}
		host := Host{CPUMilli: sh.Host.CPUMilli, MemoryMiB: sh.Host.MemoryMiB}
		if d := pick(); host.CPUMilli <= math.MaxInt64-d {
			host.CPUMilli += d
		}
		if d := pick(); host.MemoryMiB <= math.MaxInt64-d {
			host.MemoryMiB += d
		}
		f := newFGD(Workload{sh}, Capacity{})
		if got, want := f.feeds(0, host), hostFeeds(host, sh); got != want {
			t.Fatalf("shape %+v host %+v: feeds %d, hostFeeds %d", sh, host, got, want)
		}
	}
}

func TestShapeCounterRemove(t *testing.T) {
	var sc ShapeCounter
	h := Host{CPUMilli: 1000}
	sc.Add(req(app(0, 4, 1)), h, 0)
	sc.Add(req(app(0, 4, 1)), h, 0)
	sc.Add(gpushare.PodRequest{}, h, 0)
	sc.Remove(gpushare.PodRequest{}, h, 0)
	sc.Remove(req(app(0, 8, 1)), h, 0) // never added: no change
	sc.Remove(req(app(0, 4, 1)), h, 0)
	if sc.Total() != 1 {
		t.Fatalf("Total = %d, want 1", sc.Total())
	}
	if diff := cmp.Diff(Workload{{Cards: 1, PerCard: 4, Host: h, Weight: 1}}, sc.Workload(1, 10)); diff != "" {
		t.Errorf("Workload (-want,+got):\n%s", diff)
	}
}

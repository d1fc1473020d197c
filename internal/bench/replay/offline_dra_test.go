package replay

import (
	"math/rand"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/policy"
)

// draFixture: n0 has the cpu and two cards, the second 700 of 1000 used; n1 has a tenth
// of the cpu and one card, 500 used. A pod asking 300 of one card:
//   - the device-plugin path with binpack takes n0's second card: it is full then (score
//     .75×1 + .25×.5 = .875 against n1's .75×.8 + .25×.8 = .8);
//   - DRA alone ranks by cpu and memory only and takes n0, where the allocator gives it
//     the first card with room, card 0;
//   - DRA with binpack scoring rates n0 by that first-fit placement, .75×.3 + .25×.5 =
//     .35, and takes n1.
var draFixture = []NodeSpec{
	{Name: "n0", MilliCPU: 64000, MemoryMiB: 65536, GPUs: 2, Model: "T4"},
	{Name: "n1", MilliCPU: 8000, MemoryMiB: 65536, GPUs: 1, Model: "T4"},
}

// newFixtureOffline returns an offline replay of nodes with cards' units used as given,
// node by node.
func newFixtureOffline(t *testing.T, cfg offlineConfig, nodes []NodeSpec, used map[string][]int64) *offline {
	t.Helper()
	if err := cfg.checkDRA(); err != nil {
		t.Fatal(err)
	}
	state, _ := newOfflineNodes(cfg.Units, nodes)
	for _, n := range state {
		for i, u := range used[n.spec.Name] {
			n.policy.Cards[i].Used = u
		}
	}
	return &offline{cfg: cfg, state: state, rng: rand.New(rand.NewSource(cfg.Seed)), view: make([]policy.Node, len(state))}
}

// cardsUsed returns each node's cards' used units.
func (o *offline) cardsUsed() map[string][]int64 {
	out := map[string][]int64{}
	for _, n := range o.state {
		for _, c := range n.policy.Cards {
			out[n.spec.Name] = append(out[n.spec.Name], c.Used)
		}
	}
	return out
}

func TestOfflineDRAChoices(t *testing.T) {
	units, err := newUnits(UnitMilli, draFixture)
	if err != nil {
		t.Fatal(err)
	}
	binpack, err := policy.New("binpack")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string][]int64{"n0": {0, 700}, "n1": {500}}
	for _, tc := range []struct {
		name     string
		cfg      offlineConfig
		wantNode string
		wantUsed map[string][]int64
	}{
		{"device plugin, binpack", offlineConfig{Policy: binpack, Units: units, Ties: TiesFirst},
			"n0", map[string][]int64{"n0": {0, 1000}, "n1": {500}}},
		{"DRA alone", offlineConfig{Units: units, Ties: TiesFirst, DRA: DRAAlone},
			"n0", map[string][]int64{"n0": {300, 700}, "n1": {500}}},
		{"DRA alone, random ties", offlineConfig{Units: units, Ties: TiesRandom, DRA: DRAAlone},
			"n0", map[string][]int64{"n0": {300, 700}, "n1": {500}}},
		{"DRA with binpack scoring", offlineConfig{Policy: binpack, Units: units, Ties: TiesFirst, DRA: DRAGPUShare},
			"n1", map[string][]int64{"n0": {0, 700}, "n1": {800}}},
	} {
		o := newFixtureOffline(t, tc.cfg, draFixture, used)
		if got := o.place(tc.cfg.Policy, gpuPod("p", 1, 300)); got != tc.wantNode {
			t.Errorf("%s: node %q, want %q", tc.name, got, tc.wantNode)
		}
		if diff := cmp.Diff(tc.wantUsed, o.cardsUsed()); diff != "" {
			t.Errorf("%s: cards used (-want,+got):\n%s", tc.name, diff)
		}
	}
}

func TestOfflineDRAMultiCard(t *testing.T) {
	// Two whole cards on a node of four whose card 1 is half used: the allocator takes the
	// first two empty ones, 0 and 2, whatever the policy would have chosen.
	nodes := []NodeSpec{{Name: "n0", MilliCPU: 64000, MemoryMiB: 65536, GPUs: 4, Model: "V100M32"}}
	units, _ := newUnits(UnitMilli, nodes)
	fgd, _ := policy.New("fgd")
	for _, cfg := range []offlineConfig{
		{Units: units, Ties: TiesRandom, DRA: DRAAlone},
		{Policy: fgd, Units: units, Ties: TiesRandom, CPUPods: CPURanked, DRA: DRAGPUShare},
	} {
		o := newFixtureOffline(t, cfg, nodes, map[string][]int64{"n0": {0, 500, 0, 0}})
		if got := o.place(cfg.Policy, gpuPod("p", 2, 1000)); got != "n0" {
			t.Errorf("%s: node %q", cfg.DRA, got)
		}
		if diff := cmp.Diff(map[string][]int64{"n0": {1000, 500, 1000, 0}}, o.cardsUsed()); diff != "" {
			t.Errorf("%s: cards used (-want,+got):\n%s", cfg.DRA, diff)
		}
	}
}

func TestOfflineDRAAloneRanksByHost(t *testing.T) {
	// Three nodes with free cards: kube-scheduler's scorers see cpu and memory only. n1 has
	// the most of both free and takes the GPU pod although its cards are the emptiest; a
	// CPU-only pod is ranked the same way (no first fit); identical nodes tie at random.
	nodes := []NodeSpec{
		{Name: "n0", MilliCPU: 16000, MemoryMiB: 65536, GPUs: 2, Model: "T4"},
		{Name: "n1", MilliCPU: 64000, MemoryMiB: 262144, GPUs: 8, Model: "G2"},
		{Name: "n2", MilliCPU: 16000, MemoryMiB: 65536, GPUs: 2, Model: "T4"},
	}
	units, _ := newUnits(UnitMilli, nodes)
	pods := []PodSpec{gpuPod("g", 1, 500), {Name: "c", MilliCPU: 4000, MemoryMiB: 1024}}
	seen := map[string]bool{}
	for seed := int64(0); seed < 20; seed++ {
		got := offlineNodes(t, offlineConfig{Units: units, Ties: TiesRandom, Seed: seed, DRA: DRAAlone}, nodes, pods)
		if got[0] != "n1" || got[1] != "n1" {
			t.Errorf("seed %d: %v, want both on n1", seed, got)
		}
		tie := offlineNodes(t, offlineConfig{Units: units, Ties: TiesRandom, Seed: seed, DRA: DRAAlone}, []NodeSpec{nodes[0], nodes[2]}, pods[:1])
		seen[tie[0]] = true
	}
	if len(seen) != 2 {
		t.Errorf("ties between identical nodes over 20 seeds went only to %v", seen)
	}
	if _, err := replayOffline(t.Context(), offlineConfig{Units: units, DRA: "sometimes"}, nodes, pods, newRecorder(1), nil); err == nil {
		t.Errorf("unknown DRA mode accepted")
	}
	if _, err := replayOffline(t.Context(), offlineConfig{Units: units, DRA: DRAGPUShare}, nodes, pods, newRecorder(1), nil); err == nil {
		t.Errorf("DRA with GPUShare scoring and no policy accepted")
	}
	if _, err := replayOffline(t.Context(), offlineConfig{Units: units, Ties: TiesRandomScore, DRA: DRAAlone}, nodes, pods, newRecorder(1), nil); err == nil {
		t.Errorf("DRA with standalone scores accepted")
	}
}

// TestOfflineDRASampleTrace pins the DRA emulations' outcomes on the openb sample, as
// TestOfflineSampleTrace does for the device-plugin path: the benchmark's DRA figures are
// made of these decisions.
func TestOfflineDRASampleTrace(t *testing.T) {
	units, err := newUnits(UnitMilli, sampleNodes(t))
	if err != nil {
		t.Fatal(err)
	}
	fgd, err := policy.New("fgd")
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range []struct {
		family, dra string
		want        sampleOutcome
	}{
		{"multigpu20", DRAAlone, sampleOutcome{Failed: 77, AllocatedMilli: 298670}},
		{"multigpu20", DRAGPUShare, sampleOutcome{Failed: 105, AllocatedMilli: 302210}},
		{"gpuspec25", DRAAlone, sampleOutcome{Failed: 77, AllocatedMilli: 294190}},
		{"gpuspec25", DRAGPUShare, sampleOutcome{Failed: 113, AllocatedMilli: 300500}},
	} {
		name := run.family + "/" + run.dra
		cfg := offlineConfig{Units: units, Ties: TiesRandom, Seed: 42, CPUPods: CPUExtender, DRA: run.dra}
		if run.dra == DRAGPUShare {
			cfg.Policy = fgd
		}
		if got := replaySample(t, name, run.family, cfg); got != run.want {
			t.Errorf("%s: %+v, want %+v", name, got, run.want)
		}
	}
}

func TestOfflineMode(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{}, "offline"},
		{Options{OfflineTies: TiesRandom, OfflineCPUPods: CPUExtender}, "offline-random-cpu-extender"},
		{Options{OfflineTies: TiesRandom, OfflineCPUPods: CPUExtender, OfflineDRA: DRAGPUShare}, "offline-random-cpu-extender-dra-gpushare"},
		{Options{OfflineTies: TiesRandom, OfflineCPUPods: CPUExtender, OfflineDRA: DRAAlone}, "offline-dra-alone-random"},
		{Options{OfflineDRA: DRAAlone}, "offline-dra-alone"},
		{Options{OfflineTies: TiesRandom, OfflineCPUPods: CPUExtender, OfflineReserve: Reservation{Cards: 600, MinMilli: 800, MaxMilli: 999}}, "offline-random-cpu-extender-reserve600-800-999"},
	} {
		if got := tc.o.offlineMode(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.o, got, tc.want)
		}
	}
}

// uncachedPolicy hides a policy's fast scoring from pkg/policy: a Scorer of it knows no
// usage scoring and no memo and goes through FirstFit (or Place) and Score for every node:
// the reference the DRA emulation's Scorer is held to.
type uncachedPolicy struct{ policy.Policy }

// uncachedWorkloadAware is uncachedPolicy of a policy.WorkloadAware policy.
type uncachedWorkloadAware struct{ uncachedPolicy }

// uncached wraps p, policy.WorkloadAware where p is.
func uncached(p policy.Policy) policy.Policy {
	if _, ok := p.(policy.WorkloadAware); ok {
		return uncachedWorkloadAware{uncachedPolicy{p}}
	}
	return uncachedPolicy{p}
}

func (u uncachedWorkloadAware) WithWorkload(w policy.Workload, c policy.Capacity) policy.Policy {
	return uncached(u.Policy.(policy.WorkloadAware).WithWorkload(w, c))
}

// replayCards replays pods as replayOffline does and returns each pod's node ("" where it
// failed) and the cards' used units at the end.
func replayCards(t *testing.T, cfg offlineConfig, nodes []NodeSpec, pods []PodSpec) ([]string, map[string][]int64) {
	t.Helper()
	o, capacity, err := newOffline(cfg, nodes)
	if err != nil {
		t.Fatal(err)
	}
	learn := newLearner(cfg.Policy, capacity)
	placed := make([]string, 0, len(pods))
	for _, pod := range pods {
		placed = append(placed, o.place(learn.next(o, pod), pod))
	}
	return placed, o.cardsUsed()
}

// TestOfflineDRAScorerPlacesAsUncached replays the openb sample with the DRA emulation
// scoring through policy.NewFirstFitScorer (buffers reused, fgd's memo) and through FirstFit
// then Score on every node, and wants the same node for every pod and the same cards used,
// for each policy, tie mode and family.
func TestOfflineDRAScorerPlacesAsUncached(t *testing.T) {
	nodes := sampleNodes(t)
	units, err := newUnits(UnitMilli, nodes)
	if err != nil {
		t.Fatal(err)
	}
	for _, family := range []string{"multigpu20", "gpuspec25"} {
		pods, _, err := buildWorkload(samplePods(t, family), totalGPUMilli(nodes), 42, 1.3)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"fgd", "binpack", "bestfit"} {
			pol, err := policy.New(name)
			if err != nil {
				t.Fatal(err)
			}
			for _, ties := range []string{TiesRandom, TiesFirst} {
				cfg := offlineConfig{Policy: pol, Units: units, Ties: ties, Seed: 42, CPUPods: CPUExtender, DRA: DRAGPUShare}
				cached, cachedCards := replayCards(t, cfg, nodes, pods)
				cfg.Policy = uncached(pol)
				want, wantCards := replayCards(t, cfg, nodes, pods)
				label := family + "/" + name + "/" + ties
				if diff := cmp.Diff(want, cached); diff != "" {
					t.Errorf("%s: nodes (-uncached,+cached):\n%s", label, diff)
				}
				if diff := cmp.Diff(wantCards, cachedCards); diff != "" {
					t.Errorf("%s: cards used (-uncached,+cached):\n%s", label, diff)
				}
			}
		}
	}
}

package replay

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/policy"
)

func TestOffline(t *testing.T) {
	nodes := []NodeSpec{
		{Name: "n0", MilliCPU: 4000, MemoryMiB: 4096, GPUs: 2, Model: "T4"},
		{Name: "n1", MilliCPU: 4000, MemoryMiB: 4096, GPUs: 1, Model: "P100"},
		{Name: "n2", MilliCPU: 500, MemoryMiB: 4096, GPUs: 4, Model: "T4"},
	}
	// binpack scores 3/4 the used share of the chosen cards + 1/4 the node's, 0..10.
	pods := []PodSpec{
		// n2 lacks the cpu; n1 scores .75×.5+.25×.5 = .5 → 5, n0 .75×.5+.25×.25 → 4: n1.
		gpuPod("a", 1, 500),
		// n1's card becomes full → 10: n1.
		gpuPod("b", 1, 500),
		// only P100 allowed, and n1 is full: fails.
		{Name: "c", MilliCPU: 100, MemoryMiB: 10, NumGPU: 1, GPUMilli: 300, GPUSpec: []string{"P100"}},
		// two whole cards: only n0 has two free cards and the cpu.
		gpuPod("d", 2, 1000),
		// two whole cards with little cpu: n0 and n1 are full, n2 fits.
		{Name: "e", MilliCPU: 100, MemoryMiB: 10, NumGPU: 2, GPUMilli: 1000},
		// a model no node has: fails.
		{Name: "f", MilliCPU: 1, MemoryMiB: 1, NumGPU: 1, GPUMilli: 100, GPUSpec: []string{"A10"}},
		// CPU-only: n2 lacks the cpu; n0 and n1 both score 10 (full) → lowest index n0.
		{Name: "g", MilliCPU: 1000, MemoryMiB: 10},
	}
	got, rec := replayPlacements(t, "binpack", offlineConfig{}, nodes, pods)
	want := []string{"a@n1", "b@n1", "c@", "d@n0", "e@n2", "f@", "g@n0"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("placements (-want,+got):\n%s", diff)
	}
	// allocated: 500 + 500 + 2000 + 2000 = 5000 of 7000; arrived adds c (300) and f (100).
	last := rec.Steps()[len(rec.Steps())-1]
	if last.AllocatedMilli != 5000 || last.ArrivedMilli != 5400 || last.Failed != 2 {
		t.Errorf("last step = %+v", last)
	}
}

func TestOfflineRandomTies(t *testing.T) {
	// Three identical empty nodes: binpack scores them alike for the first GPU pod, so
	// "first" takes n0 and "random" a seeded random one; CPU-only pods, which the extender
	// never sees, go first fit (n0) under "random" as under kube-scheduler.
	nodes := []NodeSpec{
		{Name: "n0", MilliCPU: 64000, MemoryMiB: 65536, GPUs: 8, Model: "G2"},
		{Name: "n1", MilliCPU: 64000, MemoryMiB: 65536, GPUs: 8, Model: "G2"},
		{Name: "n2", MilliCPU: 64000, MemoryMiB: 65536, GPUs: 8, Model: "G2"},
	}
	gpu := []PodSpec{gpuPod("g", 1, 100)}
	cpu := []PodSpec{{Name: "c0", MilliCPU: 100, MemoryMiB: 1}, {Name: "c1", MilliCPU: 100, MemoryMiB: 1}}
	pol, _ := policy.New("binpack")
	units, _ := newUnits(UnitMilli, nodes)
	first := func(ties string, seed int64, pods []PodSpec) []string {
		return offlineNodes(t, offlineConfig{Policy: pol, Units: units, Ties: ties, Seed: seed}, nodes, pods)
	}
	seen, seenCPU := map[string]bool{}, map[string]bool{}
	for seed := int64(0); seed < 20; seed++ {
		if got := first(TiesFirst, seed, gpu); got[0] != "n0" {
			t.Errorf("first, seed %d: %v, want n0", seed, got)
		}
		a, b := first(TiesRandom, seed, gpu), first(TiesRandom, seed, gpu)
		if a[0] != b[0] {
			t.Errorf("random, seed %d: %v then %v", seed, a, b)
		}
		seen[a[0]] = true
		if got := first(TiesRandom, seed, cpu); !cmp.Equal(got, []string{"n0", "n0"}) {
			t.Errorf("random, CPU-only pods: %v, want first fit", got)
		}
		rec := newRecorder(totalGPUMilli(nodes))
		cfg := offlineConfig{Policy: pol, Units: units, Ties: TiesRandom, Seed: seed, CPUPods: CPURandom}
		if _, err := replayOffline(context.Background(), cfg, nodes, cpu, rec, nil); err != nil {
			t.Fatal(err)
		}
		seenCPU[rec.Steps()[0].Node] = true
	}
	if len(seen) != 3 || len(seenCPU) != 3 {
		t.Errorf("random ties over 20 seeds chose only %v (GPU pod), %v (CPU-only pod, -cpu-pods random)", seen, seenCPU)
	}
	if _, err := replayOffline(context.Background(), offlineConfig{Policy: pol, Units: units, CPUPods: "everywhere"}, nodes, gpu, newRecorder(1), nil); err == nil {
		t.Errorf("unknown CPU-only pod mode accepted")
	}
	if _, err := replayOffline(context.Background(), offlineConfig{Policy: pol, Units: units, Ties: "coin"}, nodes, gpu, newRecorder(1), nil); err == nil {
		t.Errorf("unknown tie mode accepted")
	}
}

// TestOfflineSampleTrace replays the openb sample at 130 % load with the policies and tie
// modes the benchmarks use, checks that no node got more GPU, CPU or memory than it has,
// and pins each run's outcome: the benchmark's figures are made of these decisions.
func TestOfflineSampleTrace(t *testing.T) {
	nodes := sampleNodes(t)
	units, err := newUnits(UnitMilli, nodes)
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range []struct {
		family, policy, ties string
		want                 sampleOutcome
	}{
		// 480 pods (300 sampled, 180 clones) on 61 nodes of 314,000 GPU-milli.
		{"multigpu20", "binpack", TiesFirst, sampleOutcome{Failed: 105, AllocatedMilli: 300800}},
		{"multigpu20", "binpack", TiesRandomScore, sampleOutcome{Failed: 121, AllocatedMilli: 272450}},
		{"multigpu20", "spread", TiesFirst, sampleOutcome{Failed: 94, AllocatedMilli: 271460}},
		{"multigpu20", "bestfit", TiesRandom, sampleOutcome{Failed: 146, AllocatedMilli: 264780}},
		{"multigpu20", "fgd", TiesFirst, sampleOutcome{Failed: 105, AllocatedMilli: 301530}},
		{"multigpu20", "fgd", TiesRandom, sampleOutcome{Failed: 119, AllocatedMilli: 281870}},
		{"gpuspec25", "binpack", TiesRandomScore, sampleOutcome{Failed: 140, AllocatedMilli: 269700}},
		{"gpuspec25", "fgd", TiesFirst, sampleOutcome{Failed: 113, AllocatedMilli: 300500}},
		{"gpuspec25", "fgd", TiesRandom, sampleOutcome{Failed: 140, AllocatedMilli: 278830}},
	} {
		name := run.family + "/" + run.policy + "/" + run.ties
		pol, err := policy.New(run.policy)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := replaySample(t, name, run.family, offlineConfig{Policy: pol, Units: units, Ties: run.ties, Seed: 42})
		if got != run.want {
			t.Errorf("%s: %+v, want %+v", name, got, run.want)
		}
	}
}

// sampleOutcome is what a replay of the openb sample ends with.
type sampleOutcome struct {
	Failed         int
	AllocatedMilli int64
}

// replaySample replays family of the openb sample at 130 % load, seed 42, with cfg (its
// Units those of the sample's nodes), checks that no node got more GPU, CPU or memory than
// it has and that the recorder's last step agrees with the steps, and returns the outcome.
func replaySample(t *testing.T, name, family string, cfg offlineConfig) sampleOutcome {
	t.Helper()
	nodes := sampleNodes(t)
	pods, _, err := buildWorkload(samplePods(t, family), totalGPUMilli(nodes), 42, 1.3)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(totalGPUMilli(nodes))
	if _, err := replayOffline(context.Background(), cfg, nodes, pods, rec, nil); err != nil {
		t.Fatal(err)
	}
	byName := map[string]PodSpec{}
	for _, p := range pods {
		byName[p.Name] = p
	}
	used := map[string][3]int64{}
	var got sampleOutcome
	for _, s := range rec.Steps() {
		if s.Node == "" {
			got.Failed++
			continue
		}
		p := byName[s.Pod]
		u := used[s.Node]
		used[s.Node] = [3]int64{u[0] + p.TotalGPUMilli(), u[1] + p.MilliCPU, u[2] + p.MemoryMiB}
		got.AllocatedMilli += p.TotalGPUMilli()
	}
	for _, n := range nodes {
		u := used[n.Name]
		if u[0] > n.GPUMilli() || u[1] > n.MilliCPU || u[2] > n.MemoryMiB {
			t.Errorf("%s: node %s over-committed: gpu %d/%d cpu %d/%d mem %d/%d", name, n.Name,
				u[0], n.GPUMilli(), u[1], n.MilliCPU, u[2], n.MemoryMiB)
		}
	}
	if last := rec.Steps()[len(rec.Steps())-1]; last.AllocatedMilli != got.AllocatedMilli || last.Failed != got.Failed {
		t.Errorf("%s: recorder's last step %+v, the steps add up to %+v", name, last, got)
	}
	return got
}

// TestOfflineCPUExtender checks that "extender" is "random" for a policy that scores pods
// without gpu-mem alike and "ranked" for a workload-aware one, seed for seed.
func TestOfflineCPUExtender(t *testing.T) {
	nodes := []NodeSpec{
		{Name: "n0", MilliCPU: 64000, MemoryMiB: 65536, GPUs: 8, Model: "G2"},
		{Name: "n1", MilliCPU: 8000, MemoryMiB: 65536, GPUs: 2, Model: "T4"},
		{Name: "n2", MilliCPU: 96000, MemoryMiB: 65536, GPUs: 8, Model: "G2"},
	}
	pods := []PodSpec{gpuPod("g0", 1, 500), {Name: "c0", MilliCPU: 2000, MemoryMiB: 1}, gpuPod("g1", 1, 1000),
		{Name: "c1", MilliCPU: 4000, MemoryMiB: 1}, {Name: "c2", MilliCPU: 1000, MemoryMiB: 1}}
	units, _ := newUnits(UnitMilli, nodes)
	run := func(name, cpuPods string, seed int64) []string {
		pol, err := policy.New(name)
		if err != nil {
			t.Fatal(err)
		}
		return offlineNodes(t, offlineConfig{Policy: pol, Units: units, Ties: TiesRandom, Seed: seed, CPUPods: cpuPods}, nodes, pods)
	}
	for seed := int64(0); seed < 10; seed++ {
		for _, tc := range []struct{ policy, same string }{{"binpack", CPURandom}, {"fgd", CPURanked}} {
			if got, want := run(tc.policy, CPUExtender, seed), run(tc.policy, tc.same, seed); !cmp.Equal(got, want) {
				t.Errorf("%s seed %d: extender placed %v, %s placed %v", tc.policy, seed, got, tc.same, want)
			}
		}
	}
}

// offlineNodes replays pods offline with cfg and returns where each went ("" = failed).
func offlineNodes(t *testing.T, cfg offlineConfig, nodes []NodeSpec, pods []PodSpec) []string {
	t.Helper()
	rec := newRecorder(totalGPUMilli(nodes))
	if _, err := replayOffline(context.Background(), cfg, nodes, pods, rec, nil); err != nil {
		t.Fatal(err)
	}
	out := make([]string, 0, len(pods))
	for _, s := range rec.Steps() {
		out = append(out, s.Node)
	}
	return out
}

func TestOfflineFGDConstraints(t *testing.T) {
	// n0 (P100) and n1 (G2), two cards each. p may run on P100 only and takes one of n0's
	// cards. a may run anywhere: on n0 it would take the last card p's shape can use, on n1
	// it takes a card p's shape could never use (fgd's ΔF lower by that shape's weight ×
	// 1000, scaled by its scarcity). Without constraints both ΔF are 0 and the tie-breaker
	// (binpack) would take n0, the fuller node.
	nodes := []NodeSpec{
		{Name: "n0", MilliCPU: 64000, MemoryMiB: 65536, GPUs: 2, Model: "P100"},
		{Name: "n1", MilliCPU: 64000, MemoryMiB: 65536, GPUs: 2, Model: "G2"},
	}
	pods := []PodSpec{
		{Name: "p", MilliCPU: 1000, MemoryMiB: 10, NumGPU: 1, GPUMilli: 1000, GPUSpec: []string{"P100"}},
		gpuPod("a", 1, 1000),
	}
	pol, _ := policy.New("fgd")
	units, _ := newUnits(UnitMilli, nodes)
	if diff := cmp.Diff([]string{"n0", "n1"}, offlineNodes(t, offlineConfig{Policy: pol, Units: units}, nodes, pods)); diff != "" {
		t.Errorf("nodes (-want,+got):\n%s", diff)
	}
}

func TestOfflineFGDScarcity(t *testing.T) {
	// One P100 node and three T4 nodes, two cards each. p (P100 only) takes a P100 card, t1
	// and t2 (T4 only) two T4 cards; then a, anywhere, one card. Free then: 1000 units on
	// P100, 4000 on T4 (reach), 5000 in all. Weights by pod count: p 1/4, t 2/4. On the P100
	// node a lowers F by t's weight × 1000, on a T4 node by p's: unscaled 500 against 250,
	// and a would take the last P100 card; scaled by scarcity t's weight is × 5/4 and p's × 5:
	// 625 against 1250, and a goes to T4.
	nodes := []NodeSpec{
		{Name: "p100", MilliCPU: 64000, MemoryMiB: 65536, GPUs: 2, Model: "P100"},
		{Name: "t4-0", MilliCPU: 64000, MemoryMiB: 65536, GPUs: 2, Model: "T4"},
		{Name: "t4-1", MilliCPU: 64000, MemoryMiB: 65536, GPUs: 2, Model: "T4"},
		{Name: "t4-2", MilliCPU: 64000, MemoryMiB: 65536, GPUs: 2, Model: "T4"},
	}
	only := func(name, model string) PodSpec {
		return PodSpec{Name: name, MilliCPU: 1000, MemoryMiB: 10, NumGPU: 1, GPUMilli: 1000, GPUSpec: []string{model}}
	}
	pods := []PodSpec{only("p", "P100"), only("t1", "T4"), only("t2", "T4"), gpuPod("a", 1, 1000)}
	pol, _ := policy.New("fgd")
	units, _ := newUnits(UnitMilli, nodes)
	got := offlineNodes(t, offlineConfig{Policy: pol, Units: units}, nodes, pods)
	if got[0] != "p100" || got[3] == "p100" || got[3] == "" {
		t.Errorf("nodes %v: want p on p100 and a on a T4 node", got)
	}
}

func TestModelConstraints(t *testing.T) {
	state := []*offlineNode{{spec: NodeSpec{Model: "T4"}}, {spec: NodeSpec{Model: "P100"}}, {spec: NodeSpec{Model: "P100"}}}
	m := &modelConstraints{ids: map[string]policy.Constraint{}}
	for _, tc := range []struct {
		spec []string
		want policy.Constraint
	}{
		{nil, 0},
		{[]string{"P100", "T4"}, 1},
		{[]string{"T4", "P100", "P100"}, 1}, // the same models, in another order and repeated
		{[]string{"T4"}, 2},
	} {
		if got := m.of(PodSpec{GPUSpec: tc.spec}, state); got != tc.want {
			t.Errorf("constraint of %v = %d, want %d", tc.spec, got, tc.want)
		}
	}
	// Constraint 2 (T4 only) fails on the P100 nodes alone; constraint 1 nowhere.
	for i, n := range state {
		if got, want := n.policy.Unmet.Has(2), n.spec.Model == "P100"; got != want || n.policy.Unmet.Has(1) {
			t.Errorf("node %d (%s): Unmet %v", i, n.spec.Model, n.policy.Unmet)
		}
	}
	if &state[1].policy.Unmet[0] != &state[2].policy.Unmet[0] {
		t.Error("nodes of one model do not share their Unmet set")
	}
}

// replayPlacements replays pods offline on nodes under the named policy, with cfg's other
// settings and GPU-milli units, and returns "pod@node" for each pod in order ("pod@" where
// it failed) and the recorder.
func replayPlacements(t *testing.T, policyName string, cfg offlineConfig, nodes []NodeSpec, pods []PodSpec) ([]string, *recorder) {
	t.Helper()
	pol, err := policy.New(policyName)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Policy = pol
	if cfg.Units, err = newUnits(UnitMilli, nodes); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(totalGPUMilli(nodes))
	if _, err := replayOffline(context.Background(), cfg, nodes, pods, rec, nil); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range rec.Steps() {
		got = append(got, s.Pod+"@"+s.Node)
	}
	return got, rec
}

package replay

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/policy"
)

const churnDir = "testdata/churn/"

// churnFixture returns the hand-made trace's nodes and stream with timing.
func churnFixture(t *testing.T, timing ChurnTiming) ([]NodeSpec, []ChurnPod) {
	t.Helper()
	stream, nodes, borrowed, err := ChurnStreamOf(ChurnOptions{NodesPath: churnDir + "nodes.csv", PodsPath: churnDir + "pods.csv", Timing: timing})
	if err != nil {
		t.Fatal(err)
	}
	if borrowed != 0 {
		t.Fatalf("borrowed %d times, want 0", borrowed)
	}
	return nodes, stream
}

func binpackConfig(t *testing.T, nodes []NodeSpec) offlineConfig {
	t.Helper()
	pol, err := policy.New("binpack")
	if err != nil {
		t.Fatal(err)
	}
	units, err := newUnits(UnitMilli, nodes)
	if err != nil {
		t.Fatal(err)
	}
	return offlineConfig{Policy: pol, Units: units}
}

// TestReplayChurn works the fixture's events out by hand (binpack, first-best ties: equal
// nodes go to the lower index):
//
//	t=0   a (1 card) → node-0, leaves at 100        t=10 b (1 card) → node-1, leaves at 60
//	t=20  c (½ card) waits     t=30 d (1 card) waits
//	t=60  b leaves: c fits node-1 (waited 40, leaves at 240); d does not
//	t=70  e (2 cards) waits: no node has two cards, it never fits
//	t=100 a leaves: d → node-0 (waited 70, leaves at 110)
//	t=110 d leaves; t=240 c leaves; e is left waiting.
func TestReplayChurn(t *testing.T) {
	nodes, stream := churnFixture(t, ChurnTiming{ArrivalFactor: 1, DurationFactor: 1})
	res, err := replayChurn(context.Background(), binpackConfig(t, nodes), nodes, stream)
	if err != nil {
		t.Fatal(err)
	}
	want := []ChurnSample{
		{Time: 0, AllocatedMilli: 1000},
		{Time: 10, AllocatedMilli: 2000},
		{Time: 20, AllocatedMilli: 2000, PendingPods: 1, PendingGPUMilli: 500},
		{Time: 30, AllocatedMilli: 2000, PendingPods: 2, PendingGPUMilli: 1500},
		{Time: 60, AllocatedMilli: 1500, PendingPods: 1, PendingGPUMilli: 1000},
		// e fits no empty node: it waits, but not in the pending GPU request.
		{Time: 70, AllocatedMilli: 1500, PendingPods: 2, PendingGPUMilli: 1000},
		{Time: 100, AllocatedMilli: 1500, PendingPods: 1},
		{Time: 110, AllocatedMilli: 500, PendingPods: 1},
		{Time: 240, AllocatedMilli: 0, PendingPods: 1},
	}
	if diff := cmp.Diff(want, res.Samples); diff != "" {
		t.Errorf("samples (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"node-0", "node-1", "node-1", "node-0", ""}, res.Nodes); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]float64{0, 0, 40, 70}, res.Waits); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
	if res.NeverPlaced != 1 || res.NeverPlacedGPU != 1 || res.NeverFit != 1 {
		t.Errorf("never placed %d (GPU %d, no node fits %d), want 1 (1, 1)", res.NeverPlaced, res.NeverPlacedGPU, res.NeverFit)
	}

	// The window is 0..70 (the pod at 1 % of five is the first): allocated 50 % for 10 s,
	// 100 % for 50 s, 75 % for 10 s; GPU pods wait from 20 on, with 0 % free until 60 and
	// 25 % after.
	first, last := churnWindow(stream)
	got := churnMetrics(res, len(stream), first, last)
	wantM := ChurnMetrics{
		Pods: 5, Placed: 4, NeverPlaced: 1, NeverPlacedGPU: 1, NeverFit: 1, Waited: 2,
		PendingP50: 0, PendingP99: 70, PendingMax: 70,
		AllocatedMeanPct: (10*50 + 50*100 + 10*75) / 70.0, AllocatedPeakPct: 100,
		WaitingTimePct: 100 * 50 / 70.0, FreeWhileWaitingPct: 10 * 25 / 50.0,
		Window: 70, End: 240,
	}
	if diff := cmp.Diff(wantM, got, cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
}

// TestChurnStream: arrival gaps divided by the arrival factor, run times by the duration
// factor, arrival order; a tuning clone runs when its original does, and a pod without
// times borrows a row's.
func TestChurnStream(t *testing.T) {
	byName, rows, err := readPodTimesFile(churnDir + "pods.csv")
	if err != nil {
		t.Fatal(err)
	}
	pods := []PodSpec{gpuPod("c", 1, 500), gpuPod("a", 1, 1000), gpuPod("a-tuned-3", 1, 1000), gpuPod("x", 1, 100)}
	stream, borrowed, err := buildChurnStream(pods, byName, rows[3:4], ChurnTiming{ArrivalFactor: 10, DurationFactor: 0.5}, 1)
	if err != nil {
		t.Fatal(err)
	}
	type at struct {
		Name             string
		Arrive, Duration float64
	}
	var got []at
	for _, p := range stream {
		got = append(got, at{p.Name, p.Arrive, p.Duration})
	}
	// a and its clone arrive at 1000, c at 1020 → 2, x borrows d's 1030/1040 → 3, 20.
	want := []at{{"a", 0, 200}, {"a-tuned-3", 0, 200}, {"c", 2, 360}, {"x", 3, 20}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stream (-want +got):\n%s", diff)
	}
	if borrowed != 1 {
		t.Errorf("borrowed %d, want 1", borrowed)
	}
	if _, _, err := buildChurnStream(pods, byName, rows, ChurnTiming{ArrivalFactor: 0, DurationFactor: 1}, 1); err == nil {
		t.Error("arrival factor 0: no error")
	}
}

// TestChurnWithoutDepartures: pods that never leave, arriving in the workload's order, are
// placed exactly as the arrival-only replay places them, for each scheduler emulation.
func TestChurnWithoutDepartures(t *testing.T) {
	nodes := sampleNodes(t)
	units, err := newUnits(UnitMilli, nodes)
	if err != nil {
		t.Fatal(err)
	}
	pods, _, err := buildWorkload(samplePods(t, "gpuspec25"), totalGPUMilli(nodes), 42, 1.3)
	if err != nil {
		t.Fatal(err)
	}
	stream := make([]ChurnPod, len(pods))
	for i, p := range pods {
		stream[i] = ChurnPod{PodSpec: p, Arrive: float64(i), Duration: math.Inf(1)}
	}
	for _, tc := range []struct{ name, policy, dra string }{
		{"binpack", "binpack", ""}, {"fgd", "fgd", ""}, {"dra-alone", "", DRAAlone}, {"fgd-dra", "fgd", DRAGPUShare},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := offlineConfig{Units: units, Ties: TiesRandom, Seed: 42, CPUPods: CPUExtender, DRA: tc.dra}
			if tc.policy != "" {
				if cfg.Policy, err = policy.New(tc.policy); err != nil {
					t.Fatal(err)
				}
			}
			rec := newRecorder(totalGPUMilli(nodes))
			if _, err := replayOffline(context.Background(), cfg, nodes, pods, rec, nil); err != nil {
				t.Fatal(err)
			}
			res, err := replayChurn(context.Background(), cfg, nodes, stream)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]string, len(pods))
			for i, s := range rec.Steps() {
				want[i] = s.Node
			}
			if diff := cmp.Diff(want, res.Nodes); diff != "" {
				t.Errorf("placements (-arrival-only +churn):\n%s", diff)
			}
			if res.NeverPlaced != rec.Failed() {
				t.Errorf("never placed %d, arrival-only failed %d", res.NeverPlaced, rec.Failed())
			}
		})
	}
}

// TestRunChurn writes the result files, and churn-report's table and chart read them.
func TestRunChurn(t *testing.T) {
	out := t.TempDir()
	s, err := RunChurn(context.Background(), ChurnOptions{
		NodesPath: churnDir + "nodes.csv", PodsPath: churnDir + "pods.csv", Timing: ChurnTiming{ArrivalFactor: 1, DurationFactor: 1},
		Unit: UnitMilli, Label: "binpack", Policy: "binpack", Ties: TiesFirst, OutDir: filepath.Join(out, "pods", "binpack"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.NeverPlaced != 1 || s.PendingP99 != 70 || s.Trace != "pods" {
		t.Errorf("summary %+v", s)
	}
	runs, err := CollectChurn([]string{out})
	if err != nil || len(runs) != 1 {
		t.Fatalf("collect: %v, %d runs", err, len(runs))
	}
	pts, err := ReadChurnSeries(runs[0].Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 9 || pts[1] != (Point{Arrived: 10, Allocated: 100}) {
		t.Errorf("series %v", pts)
	}
}

func TestClip(t *testing.T) {
	pts := []Point{{0, 10}, {5, 20}, {10, 30}, {20, 40}}
	for _, tc := range []struct {
		from, to float64
		want     []Point
	}{
		{0, 20, pts},
		{7, 12, []Point{{7, 20}, {10, 30}}},
		{5, 5, []Point{{5, 20}}},
		{30, 40, nil},
	} {
		if diff := cmp.Diff(tc.want, clip(pts, tc.from, tc.to)); diff != "" {
			t.Errorf("clip %g..%g (-want +got):\n%s", tc.from, tc.to, diff)
		}
	}
}

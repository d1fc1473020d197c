package replay

import (
	"context"
	"os"
	"testing"

	"github.com/gpushare/gpushare/internal/bench/bound"
)

// bruteForceAllocated returns the most GPU-milli any placement of any subset of pods
// allocates on nodes, by exhaustive search: each pod goes nowhere or onto num_gpu distinct
// cards of one node whose model it allows, each card with gpu_milli free, within the node's
// cpu and memory.
func bruteForceAllocated(nodes []NodeSpec, pods []PodSpec) int64 {
	free := make([][]int64, len(nodes))
	cpu := make([]int64, len(nodes))
	mem := make([]int64, len(nodes))
	for i, n := range nodes {
		free[i] = make([]int64, n.GPUs)
		for c := range free[i] {
			free[i][c] = 1000
		}
		cpu[i], mem[i] = n.MilliCPU, n.MemoryMiB
	}
	var best int64
	var place func(p int, allocated int64)
	// cards picks need more cards of node n from index from on, each with g free.
	var cards func(p, n, from, need int, allocated int64)
	cards = func(p, n, from, need int, allocated int64) {
		if need == 0 {
			place(p+1, allocated)
			return
		}
		g := pods[p].GPUMilli
		for c := from; c < len(free[n]); c++ {
			if free[n][c] < g {
				continue
			}
			free[n][c] -= g
			cards(p, n, c+1, need-1, allocated)
			free[n][c] += g
		}
	}
	place = func(p int, allocated int64) {
		if p == len(pods) {
			best = max(best, allocated)
			return
		}
		place(p+1, allocated) // left out
		pod := pods[p]
		for n, node := range nodes {
			if !pod.AllowsModel(node.Model) || cpu[n] < pod.MilliCPU || mem[n] < pod.MemoryMiB {
				continue
			}
			cpu[n] -= pod.MilliCPU
			mem[n] -= pod.MemoryMiB
			cards(p, n, 0, pod.NumGPU, allocated+pod.TotalGPUMilli())
			cpu[n] += pod.MilliCPU
			mem[n] += pod.MemoryMiB
		}
	}
	place(0, 0)
	return best
}

// TestBoundBelowBruteForce checks, on toy clusters of sample nodes and windows of eight
// sample GPU pods, that the bound never exceeds the least unallocated GPU % an exhaustive
// search finds, and that it is close on these small cases.
func TestBoundBelowBruteForce(t *testing.T) {
	byName := map[string]NodeSpec{}
	for _, n := range sampleNodes(t) {
		byName[n.Name] = n
	}
	clusters := [][]NodeSpec{
		// A P100 node with 16 cores (cpu binds) and a T4 node: gpu_spec matters.
		{byName["openb-node-0380"], byName["openb-node-0200"]},
		// Two T4 nodes and a P100 node.
		{byName["openb-node-0200"], byName["openb-node-0240"], byName["openb-node-0000"]},
	}
	var worst float64
	for _, family := range []string{"gpuspec25", "multigpu20"} {
		var gpuPods []PodSpec
		for _, p := range samplePods(t, family) {
			if p.NumGPU > 0 && p.NumGPU <= 2 {
				gpuPods = append(gpuPods, p)
			}
		}
		for ci, nodes := range clusters {
			if nodes[0].GPUs == 0 {
				t.Fatal("sample node missing")
			}
			capacity := totalGPUMilli(nodes)
			for start := 0; start+8 <= len(gpuPods) && start < 8*12; start += 8 {
				pods := gpuPods[start : start+8]
				res, err := bound.Compute(context.Background(), boundNodes(nodes), boundPods(pods), bound.Options{})
				if err != nil {
					t.Fatal(err)
				}
				opt := 100 - 100*float64(bruteForceAllocated(nodes, pods))/float64(capacity)
				if res.UnallocatedPct > opt+1e-6 {
					t.Errorf("%s cluster %d pods %d..%d: bound %.3f %% above the optimum %.3f %%", family, ci, start, start+7, res.UnallocatedPct, opt)
				}
				worst = max(worst, opt-res.UnallocatedPct)
				t.Logf("%s cluster %d pods %d..%d: bound %.2f %% (plain %.2f %%), optimum %.2f %%", family, ci, start, start+7, res.UnallocatedPct, res.PlainPct, opt)
			}
		}
	}
	if worst > 10 {
		t.Errorf("the bound is up to %.2f points below the optimum; want within 10 on these toys", worst)
	}
}

// TestRunBound bounds the sample's workload as the replay builds it and reads the result
// back as the family table does.
func TestRunBound(t *testing.T) {
	dir := t.TempDir()
	o := Options{
		NodesPath: sampleDir + "openb_node_list_gpu_node.csv",
		PodsPath:  sampleDir + "openb_pod_list_multigpu20.csv",
		Seed:      42, Tune: 1.3, Unit: UnitMilli, OutDir: dir + "/multigpu20/bound/seed42",
	}
	s, err := RunBound(context.Background(), o, bound.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Trace != "multigpu20" || s.Pods == 0 || s.BoundPct < 0 || s.BoundPct > 100 || s.PlainPct > s.BoundPct {
		t.Errorf("summary %+v", s)
	}
	// The same pods through the offline replay never leave less unallocated.
	o.OutDir, o.StopAtPct = dir+"/fgd", 100
	run, err := RunOffline(context.Background(), "fgd", o)
	if err != nil {
		t.Fatal(err)
	}
	if run.UnallocatedAt100 == nil || *run.UnallocatedAt100 < s.BoundPct-1e-6 {
		t.Errorf("fgd leaves %v %%, below the bound %.3f %%", run.UnallocatedAt100, s.BoundPct)
	}
	cells, err := CollectBounds([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if c := cells["multigpu20"]; c == nil || c.Runs != 1 || c.Mean != s.BoundPct {
		t.Errorf("collected %+v, want one run of %v", c, s.BoundPct)
	}
	t.Log(s.Line())
	if err := os.WriteFile(dir+"/multigpu20/bound/seed42/bound.json", []byte(`{"trace":"multigpu20","boundPct":2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := CollectBounds([]string{dir}); err == nil {
		t.Error("a bound.json without bound_pct: want an error")
	}
}

package replay

import (
	"testing"

	"github.com/gpushare/gpushare/pkg/policy"
)

// BenchmarkOfflineDRAPlace is the DRA emulation with fgd scoring (DRAGPUShare, random ties,
// CPU-only pods ranked) placing one pod on the openb sample's 61 nodes, filled by the first
// 60 % of the multigpu20 workload: every candidate scored, one placement applied, then taken
// back so that each iteration sees the same cluster. gpu is the workload's next GPU pod,
// cpu-only its next pod without GPU.
func BenchmarkOfflineDRAPlace(b *testing.B) {
	nodes, err := readNodesFile(sampleDir + "openb_node_list_gpu_node.csv")
	if err != nil {
		b.Fatal(err)
	}
	trace, err := readPodsFile(sampleDir + "openb_pod_list_multigpu20.csv")
	if err != nil {
		b.Fatal(err)
	}
	pods, _, err := buildWorkload(trace, totalGPUMilli(nodes), 42, 1.3)
	if err != nil {
		b.Fatal(err)
	}
	units, err := newUnits(UnitMilli, nodes)
	if err != nil {
		b.Fatal(err)
	}
	fgd, err := policy.New("fgd")
	if err != nil {
		b.Fatal(err)
	}
	cfg := offlineConfig{Policy: fgd, Units: units, Ties: TiesRandom, Seed: 42, CPUPods: CPUExtender, DRA: DRAGPUShare}
	o, capacity, err := newOffline(cfg, nodes)
	if err != nil {
		b.Fatal(err)
	}
	learn := newLearner(cfg.Policy, capacity)
	fill := len(pods) * 6 / 10
	for _, pod := range pods[:fill] {
		o.place(learn.next(o, pod), pod)
	}
	for _, tc := range []struct {
		name string
		gpu  bool
	}{{"gpu", true}, {"cpu-only", false}} {
		k := fill
		for k < len(pods) && (pods[k].NumGPU > 0) != tc.gpu {
			k++
		}
		if k == len(pods) {
			b.Fatalf("no %s pod after the first %d", tc.name, fill)
		}
		pod := pods[k]
		p := learn.next(o, pod)
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if node := o.place(p, pod); node != "" {
					o.unplace(node, pod)
				}
			}
		})
	}
}

// unplace takes back what apply did for pod on the node named node, the last placement.
func (o *offline) unplace(node string, pod PodSpec) {
	for _, n := range o.state {
		if n.spec.Name != node {
			continue
		}
		n.policy.Host.CPUMilli += pod.MilliCPU
		n.policy.Host.MemoryMiB += pod.MemoryMiB
		n.load.remove(pod.MilliCPU, pod.MemoryMiB)
		n.pods--
		for k := range n.policy.Cards {
			n.policy.Cards[k].Used -= o.lastUsage[n.policy.Cards[k].Index]
		}
		return
	}
}

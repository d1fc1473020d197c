package bound

import (
	"fmt"
	"math/bits"
	"slices"
	"strings"
)

// Node is one GPU node as the bound sees it.
type Node struct {
	Model     string // GPU model, matched against Pod.Models
	Cards     int    // GPUs on the node
	MilliCPU  int64  // allocatable cpu, millicores
	MemoryMiB int64  // allocatable memory, MiB
}

// Pod is one pod's request.
type Pod struct {
	NumGPU    int      // distinct cards it needs (0: CPU-only)
	GPUMilli  int64    // GPU-milli on each of its cards, 1..1000 (1000: a whole card)
	MilliCPU  int64    // millicores
	MemoryMiB int64    // MiB
	Models    []string // GPU models it may run on (gpu_spec); empty: any
}

// cardMilli is one card's capacity in GPU-milli, the trace's unit.
const cardMilli = 1000

// nodeClass is a group of identical nodes.
type nodeClass struct {
	Node
	count int64
}

// podClass is a group of pods with one request, after rounding (see groupPods).
type podClass struct {
	Pod
	count int64
}

// gpuMilli is the pod's GPU request in all, GPU-milli.
func (p Pod) gpuMilli() int64 { return int64(p.NumGPU) * p.GPUMilli }

// allows reports whether the pod may run on the model.
func (p Pod) allows(model string) bool { return len(p.Models) == 0 || slices.Contains(p.Models, model) }

// fits reports whether one pod of the class fits on an empty node of class n.
func (p podClass) fits(n nodeClass) bool {
	return p.allows(n.Model) && p.NumGPU <= n.Cards && p.MilliCPU <= n.MilliCPU && p.MemoryMiB <= n.MemoryMiB
}

// groupNodes groups identical nodes, in order of first appearance. Nodes without cards
// hold no GPU pod and are left out.
func groupNodes(nodes []Node) []nodeClass {
	idx := map[Node]int{}
	var out []nodeClass
	for _, n := range nodes {
		if n.Cards <= 0 {
			continue
		}
		if i, ok := idx[n]; ok {
			out[i].count++
			continue
		}
		idx[n] = len(out)
		out = append(out, nodeClass{Node: n, count: 1})
	}
	return out
}

// groupPods groups the GPU pods by request, cpu and memory rounded down to their leading
// sigBits binary digits (sigBits < 0: exact; 0: dropped). Rounding a request down only
// relaxes the program, so the bound stays valid; it keeps the program small enough for a
// dense simplex. CPU-only pods and pods without GPU-milli are left out: they add no
// allocated GPU, and leaving them out frees resources, so an optimum never needs them.
// Errors: a GPU-milli outside 1..1000.
func groupPods(pods []Pod, sigBits int) ([]podClass, error) {
	type key struct {
		numGPU        int
		gpu, cpu, mem int64
		models        string
	}
	idx := map[key]int{}
	var out []podClass
	for i, p := range pods {
		if p.NumGPU <= 0 || p.GPUMilli == 0 {
			continue
		}
		if p.GPUMilli < 0 || p.GPUMilli > cardMilli {
			return nil, fmt.Errorf("pod %d: gpu-milli %d per card, want 1..%d", i, p.GPUMilli, cardMilli)
		}
		models := slices.Compact(slices.Sorted(slices.Values(p.Models)))
		k := key{p.NumGPU, p.GPUMilli, roundDown(p.MilliCPU, sigBits), roundDown(p.MemoryMiB, sigBits), strings.Join(models, "|")}
		if j, ok := idx[k]; ok {
			out[j].count++
			continue
		}
		idx[k] = len(out)
		out = append(out, podClass{Pod: Pod{NumGPU: k.numGPU, GPUMilli: k.gpu, MilliCPU: k.cpu, MemoryMiB: k.mem, Models: models}, count: 1})
	}
	return out, nil
}

// roundDown keeps v's leading sigBits binary digits (sigBits < 0: v as is; v ≤ 0: 0).
func roundDown(v int64, sigBits int) int64 {
	if sigBits < 0 {
		return v
	}
	if v <= 0 || sigBits == 0 {
		return 0
	}
	drop := 64 - bits.LeadingZeros64(uint64(v)) - sigBits
	if drop <= 0 {
		return v
	}
	return v >> drop << drop
}

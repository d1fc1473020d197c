package replay

// NodeSpec is one row of a node CSV (openb_node_list_*.csv).
type NodeSpec struct {
	Name      string // sn
	MilliCPU  int64  // cpu_milli, millicores
	MemoryMiB int64  // memory_mib
	GPUs      int    // gpu: number of cards
	Model     string // model, e.g. "T4", "G2"; empty on CPU-only nodes
}

// GPUMilli is the node's GPU capacity in GPU-milli (1000 per card).
func (n NodeSpec) GPUMilli() int64 { return int64(n.GPUs) * 1000 }

// PodSpec is one row of a pod CSV (openb_pod_list_*.csv). Columns the replay does not use
// (qos, phase, times) are not kept.
type PodSpec struct {
	Name      string
	MilliCPU  int64    // cpu_milli, millicores
	MemoryMiB int64    // memory_mib
	NumGPU    int      // num_gpu: distinct cards
	GPUMilli  int64    // gpu_milli: GPU-milli on each card (1000 = a whole card)
	GPUSpec   []string // gpu_spec split on "|": allowed models; empty = any
}

// TotalGPUMilli is the pod's GPU request in GPU-milli: num_gpu × gpu_milli.
func (p PodSpec) TotalGPUMilli() int64 { return int64(p.NumGPU) * p.GPUMilli }

// AllowsModel reports whether the pod may run on a card of the given model.
func (p PodSpec) AllowsModel(model string) bool {
	if len(p.GPUSpec) == 0 {
		return true
	}
	for _, m := range p.GPUSpec {
		if m == model {
			return true
		}
	}
	return false
}

// totalGPUMilli sums the GPU capacity of the nodes in GPU-milli.
func totalGPUMilli(nodes []NodeSpec) int64 {
	var t int64
	for _, n := range nodes {
		t += n.GPUMilli()
	}
	return t
}

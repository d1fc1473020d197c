package replay

import "math"

// Defaults kube-scheduler counts for a container that requests no cpu or no memory when it
// ranks nodes by LeastAllocated (k8s.io/kubernetes pkg/scheduler/util: DefaultMilliCPURequest,
// DefaultMemoryRequest, 200 MiB).
const (
	nonZeroMilliCPU  = 100
	nonZeroMemoryMiB = 200
)

// kubeMaxNodeScore is the framework's MaxNodeScore.
const kubeMaxNodeScore = 100

// hostLoad is what kube-scheduler's resource scorers read of a node: its allocatable cpu
// (milli) and memory (MiB), the requests of its pods, and the same with a missing request
// counted as nonZeroMilliCPU / nonZeroMemoryMiB.
type hostLoad struct {
	allocCPU, allocMem     int64
	reqCPU, reqMem         int64
	nonZeroCPU, nonZeroMem int64
}

// add accounts a pod's cpu (milli) and memory (MiB) requests, 0 meaning not requested.
func (l *hostLoad) add(milliCPU, memoryMiB int64) {
	l.reqCPU += milliCPU
	l.reqMem += memoryMiB
	nzCPU, nzMem := nonZeroRequests(milliCPU, memoryMiB)
	l.nonZeroCPU += nzCPU
	l.nonZeroMem += nzMem
}

func nonZeroRequests(milliCPU, memoryMiB int64) (int64, int64) {
	if milliCPU == 0 {
		milliCPU = nonZeroMilliCPU
	}
	if memoryMiB == 0 {
		memoryMiB = nonZeroMemoryMiB
	}
	return milliCPU, memoryMiB
}

// kubeDefaultScore is the sum of kube-scheduler v1.37.2's default scores that differ
// between nodes for a replay pod whose GPU is asked in ResourceClaims: NodeResourcesFit
// (LeastAllocated on cpu and memory, weight 1) and NodeResourcesBalancedAllocation (cpu and
// memory, weight 1), each 0..100, in the framework's integer arithmetic. DRA devices are no
// resource those plugins see, so a node's cards count for nothing. The other default scorers
// give every replay node the same: DynamicResources scores only claims with
// firstAvailable sub-requests, TaintToleration and NodeAffinity only taints and preferred
// terms (the replay's nodes have no taints, its pods only required affinity),
// PodTopologySpread and InterPodAffinity nothing for bare pods without affinity,
// ImageLocality nothing for kwok nodes. Memory in MiB gives the same integers as bytes: both
// scorers use ratios, and LeastAllocated's integer division scales exactly.
func kubeDefaultScore(l hostLoad, milliCPU, memoryMiB int64) int64 {
	nzCPU, nzMem := nonZeroRequests(milliCPU, memoryMiB)
	fit := (leastRequestedScore(l.nonZeroCPU+nzCPU, l.allocCPU) + leastRequestedScore(l.nonZeroMem+nzMem, l.allocMem)) / 2
	var balanced int64
	if milliCPU > 0 || memoryMiB > 0 { // a best-effort pod skips BalancedAllocation
		with := balancedScore(l.reqCPU+milliCPU, l.allocCPU, l.reqMem+memoryMiB, l.allocMem)
		without := balancedScore(l.reqCPU, l.allocCPU, l.reqMem, l.allocMem)
		balanced = kubeMaxNodeScore/2 + (kubeMaxNodeScore/2+with-without)/2
	}
	return fit + balanced
}

// leastRequestedScore is LeastAllocated's score of one resource.
func leastRequestedScore(requested, capacity int64) int64 {
	if capacity == 0 || requested > capacity {
		return 0
	}
	return (capacity - requested) * kubeMaxNodeScore / capacity
}

// balancedScore is BalancedAllocation's score of a node at these requests: 100 × (1 − the
// standard deviation of the cpu and memory fractions), each fraction capped at 1.
func balancedScore(cpu, allocCPU, mem, allocMem int64) int64 {
	fracCPU := math.Min(float64(cpu)/float64(allocCPU), 1)
	fracMem := math.Min(float64(mem)/float64(allocMem), 1)
	std := math.Abs((fracCPU - fracMem) / 2)
	return int64((1 - std) * kubeMaxNodeScore)
}

package cache

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/gpushare/gpushare/pkg/policy"
)

// hostBook accounts CPU and memory per node as the scheduler's NodeResourcesFit does:
// allocatable minus the requests (effective, with init containers, pod-level resources and
// overhead) of the non-terminal pods bound to the node. The fragmentation-aware policy needs
// it: a node whose CPU is spent strands its free cards. Pods reserved at bind count once the
// informer sees them bound (milliseconds later).
type hostBook struct {
	mu    sync.Mutex
	alloc map[string]policy.Host
	used  map[string]policy.Host
	pods  map[types.UID]hostPod
}

type hostPod struct {
	node string
	req  policy.Host
}

func newHostBook() *hostBook {
	return &hostBook{alloc: map[string]policy.Host{}, used: map[string]policy.Host{}, pods: map[types.UID]hostPod{}}
}

// hostRequest is the pod's effective CPU (millicores) and memory (MiB, rounded up) request.
func hostRequest(pod *corev1.Pod) policy.Host {
	r := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	return policy.Host{CPUMilli: r.Cpu().MilliValue(), MemoryMiB: (r.Memory().Value() + 1<<20 - 1) >> 20}
}

// setNode records a node's allocatable CPU (millicores) and memory (MiB, rounded down).
func (h *hostBook) setNode(name string, alloc policy.Host) {
	h.mu.Lock()
	h.alloc[name] = alloc
	h.mu.Unlock()
}

func (h *hostBook) deleteNode(name string) {
	h.mu.Lock()
	delete(h.alloc, name)
	h.mu.Unlock()
}

// setPod accounts a bound, non-terminal pod on its node with its CPU and memory request
// (Pod.host, which the transform computes when the cache tracks the workload), and forgets
// any other pod.
func (h *hostBook) setPod(pod *Pod) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.removeLocked(pod.uid)
	if pod.nodeName == "" || pod.terminal {
		return
	}
	p := hostPod{node: pod.nodeName, req: pod.host}
	h.pods[pod.uid] = p
	u := h.used[p.node]
	u.CPUMilli += p.req.CPUMilli
	u.MemoryMiB += p.req.MemoryMiB
	h.used[p.node] = u
}

func (h *hostBook) deletePod(uid types.UID) {
	h.mu.Lock()
	h.removeLocked(uid)
	h.mu.Unlock()
}

func (h *hostBook) removeLocked(uid types.UID) {
	p, ok := h.pods[uid]
	if !ok {
		return
	}
	delete(h.pods, uid)
	u := h.used[p.node]
	u.CPUMilli -= p.req.CPUMilli
	u.MemoryMiB -= p.req.MemoryMiB
	if u == (policy.Host{}) {
		delete(h.used, p.node)
	} else {
		h.used[p.node] = u
	}
}

// free returns the node's free CPU and memory; false for a node it has not seen.
func (h *hostBook) free(name string) (policy.Host, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a, ok := h.alloc[name]
	if !ok {
		return policy.Host{}, false
	}
	u := h.used[name]
	return policy.Host{CPUMilli: a.CPUMilli - u.CPUMilli, MemoryMiB: a.MemoryMiB - u.MemoryMiB}, true
}

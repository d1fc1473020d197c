package cache

import (
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// hostBook accounts CPU and memory per node as the scheduler's NodeResourcesFit does:
// allocatable minus the requests (effective, with init containers, pod-level resources and
// overhead) of the non-terminal pods bound to the node. The fragmentation-aware policy needs
// it: a node whose CPU is spent strands its free cards. Pods reserved at bind count once the
// informer sees them bound (milliseconds later).
type hostBook struct {
	mu sync.Mutex
	// nodes holds each node's allocatable and used CPU and memory, and the constraints it
	// fails, in one entry, so that free, called per node of every prioritize call, reads one
	// map. Entries are changed in place and never reused once deleted, so a Shared cache's
	// index keeps a reference to each node's entry (hostRef) and the plugin's rating reads
	// it without the map.
	nodes map[string]*hostNode
	pods  map[types.UID]hostPod
	cons  *constraintBook
	// alloc is the allocatable of the known nodes in all (Cache.Capacity).
	alloc policy.Host
}

// hostNode is one node's book: known once its allocatable was set; an entry that is not
// known and has nothing used is deleted. unmet is the constraints 1..unmetAt of cons that
// the node (its labels and cards) fails: free extends it when cons has numbered more.
type hostNode struct {
	alloc, used policy.Host
	known       bool
	labels      map[string]string
	devices     []gpushare.Device // the slim node's, shared: card choices are matched against them
	unmet       policy.ConstraintSet
	unmetAt     int
}

type hostPod struct {
	node string
	req  policy.Host
}

func newHostBook(cons *constraintBook) *hostBook {
	return &hostBook{nodes: map[string]*hostNode{}, pods: map[types.UID]hostPod{}, cons: cons}
}

// hostRequest is the pod's effective CPU (millicores) and memory (MiB, rounded up) request.
func hostRequest(pod *corev1.Pod) policy.Host {
	r := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	return policy.Host{CPUMilli: r.Cpu().MilliValue(), MemoryMiB: (r.Memory().Value() + 1<<20 - 1) >> 20}
}

// setNode records a node's allocatable CPU (millicores) and memory (MiB, rounded down), its
// labels and its cards (the constraints it fails are worked out again when either changed).
func (h *hostBook) setNode(name string, alloc policy.Host, labels map[string]string, devices []gpushare.Device) {
	h.mu.Lock()
	n := h.entry(name)
	if n.known {
		h.alloc.CPUMilli -= n.alloc.CPUMilli
		h.alloc.MemoryMiB -= n.alloc.MemoryMiB
	}
	h.alloc.CPUMilli += alloc.CPUMilli
	h.alloc.MemoryMiB += alloc.MemoryMiB
	n.alloc, n.known = alloc, true
	if !maps.Equal(n.labels, labels) || !sameCardIDs(n.devices, devices) {
		n.labels, n.devices, n.unmet, n.unmetAt = labels, devices, nil, 0
	}
	h.mu.Unlock()
}

func (h *hostBook) deleteNode(name string) {
	h.mu.Lock()
	if n := h.nodes[name]; n != nil {
		if n.known {
			h.alloc.CPUMilli -= n.alloc.CPUMilli
			h.alloc.MemoryMiB -= n.alloc.MemoryMiB
		}
		n.alloc, n.known = policy.Host{}, false
		n.labels, n.devices, n.unmet, n.unmetAt = nil, nil, nil, 0
		h.dropIfEmpty(name, n)
	}
	h.mu.Unlock()
}

// capacity is the allocatable CPU and memory of the known nodes in all.
func (h *hostBook) capacity() policy.Host {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.alloc
}

// entry returns name's entry, creating it. Caller holds mu.
func (h *hostBook) entry(name string) *hostNode {
	n := h.nodes[name]
	if n == nil {
		n = &hostNode{}
		h.nodes[name] = n
	}
	return n
}

// hostRef is a reference to a node's entry for freeEach, or nil when the book has none.
type hostRef = *hostNode

// ref returns name's entry as it is now; nil when there is none (the reader then looks the
// name up).
func (h *hostBook) ref(name string) hostRef {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.nodes[name]
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
	n := h.entry(p.node)
	n.used.CPUMilli += p.req.CPUMilli
	n.used.MemoryMiB += p.req.MemoryMiB
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
	n := h.entry(p.node)
	n.used.CPUMilli -= p.req.CPUMilli
	n.used.MemoryMiB -= p.req.MemoryMiB
	h.dropIfEmpty(p.node, n)
}

// dropIfEmpty deletes name's entry n when it holds nothing (deleteNode clears the rest). A
// reference to it (ref) then reads an unknown node until the index takes a new one.
func (h *hostBook) dropIfEmpty(name string, n *hostNode) {
	if !n.known && n.used == (policy.Host{}) {
		delete(h.nodes, name)
	}
}

// free returns the node's free CPU and memory and the constraints it fails (shared: only
// read it); false for a node it has not seen.
func (h *hostBook) free(name string) (policy.Host, policy.ConstraintSet, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.freeLocked(h.nodes[name], name, nil, 0)
	return f.free, f.unmet, f.known
}

// hostFree is free's answer for one node.
type hostFree struct {
	free  policy.Host
	unmet policy.ConstraintSet
	known bool
}

// hostBlock is how many nodes the rating paths look up per lock of the book (freeEach).
const hostBlock = 64

// freeEach sets out[i] to free's answer for the node of refs[i], or of name(i) where refs[i]
// is nil, for every i of out, under one lock: the rating paths visit thousands of nodes per
// call, several pieces in parallel, and one lock per node would have them and the
// informer's updates take turns on it thousands of times a call. refs may be nil.
func (h *hostBook) freeEach(out []hostFree, refs []hostRef, name func(i int) string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range out {
		var n *hostNode
		if refs != nil {
			n = refs[i]
		}
		nm := ""
		if n == nil {
			nm = name(i)
			n = h.nodes[nm]
		}
		out[i] = h.freeLocked(n, nm, name, i)
	}
}

// freeLocked is free's answer from entry n (nil: none) of the node whose name is nm, or
// name(i) when nm is empty (read only if its unmet constraints need working out).
func (h *hostBook) freeLocked(n *hostNode, nm string, name func(i int) string, i int) hostFree {
	if n == nil || !n.known {
		return hostFree{}
	}
	if h.cons != nil && n.unmetAt < h.cons.count() {
		if nm == "" {
			nm = name(i)
		}
		n.unmet, n.unmetAt = h.cons.unmet(nm, n.labels, n.devices, n.unmet, n.unmetAt)
	}
	return hostFree{
		free:  policy.Host{CPUMilli: n.alloc.CPUMilli - n.used.CPUMilli, MemoryMiB: n.alloc.MemoryMiB - n.used.MemoryMiB},
		unmet: n.unmet, known: true,
	}
}

// sameCardIDs reports whether a and b list the same cards by what card choices match: index,
// product name and UUID.
func sameCardIDs(a, b []gpushare.Device) bool {
	return slices.EqualFunc(a, b, func(x, y gpushare.Device) bool {
		return x.Index == y.Index && x.Model == y.Model && x.UUID == y.UUID
	})
}

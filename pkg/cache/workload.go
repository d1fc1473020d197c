package cache

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// hostNodeHandler and hostPodHandler are the handlers behind Config.TrackWorkload: host
// accounting from nodes and from every pod (pods without gpu-mem take CPU too), and workload
// learning from every pod the cache sees.
func (c *Cache) hostNodeHandler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    c.onHostNode,
		UpdateFunc: func(_, obj any) { c.onHostNode(obj) },
		DeleteFunc: c.onHostNodeDelete,
	}
}

func (c *Cache) hostPodHandler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    c.onHostPod,
		UpdateFunc: func(_, obj any) { c.onHostPod(obj) },
		DeleteFunc: c.onHostPodDelete,
	}
}

func (c *Cache) onHostNode(obj any) {
	if n, ok := obj.(*slimNode); ok {
		c.hosts.setNode(n.name, n.alloc, n.labels, n.inv.Devices)
	}
}

func (c *Cache) onHostNodeDelete(obj any) {
	if n, ok := untomb(obj).(*slimNode); ok {
		c.hosts.deleteNode(n.name)
	}
}

func (c *Cache) onHostPod(obj any) {
	pod, ok := obj.(*Pod)
	if !ok {
		klog.ErrorS(nil, "host pod handler got an unexpected object", "type", typeName(obj))
		return
	}
	c.hosts.setPod(pod)
	if pod.requestErr() != nil {
		return // an invalid request never schedules: not part of the workload
	}
	c.shapes.observe(pod.uid, pod.request(), pod.host, policy.Constraint(pod.constraint))
}

func (c *Cache) onHostPodDelete(obj any) {
	if p, ok := untomb(obj).(*Pod); ok {
		c.hosts.deletePod(p.uid)
		c.shapes.forget(p.uid)
	}
}

// ObserveClaimShape adds to the learned workload the GPU shape a pod asks through DRA claims
// (req, in units), which its object does not show: the pod counts as that shape instead of a
// pod without GPU, once. host is its CPU and memory request (HostRequest), used when the
// cache has not seen the pod yet. A no-op without Config.TrackWorkload or for a pod that asks
// gpu-mem. It reports whether the workload changed (ForPod then returns a policy that knows it).
func (c *Cache) ObserveClaimShape(uid types.UID, req gpushare.PodRequest, host policy.Host) bool {
	if c.shapes == nil {
		return false
	}
	return c.shapes.observeClaims(uid, req, host)
}

// ForPod returns pol ready for one decision: a WorkloadAware policy gets the workload learned
// so far (empty when Config.TrackWorkload is off), its constrained shapes weighed by how
// scarce the free cards they can reach are (policy.Workload.ByScarcity: a pass over every
// node, only while some shape is constrained), and the known nodes' Capacity;
// other policies are returned as they are.
func (c *Cache) ForPod(pol policy.Policy) policy.Policy {
	wa, ok := pol.(policy.WorkloadAware)
	if !ok {
		return pol
	}
	var w policy.Workload
	var capacity policy.Capacity
	if c.shapes != nil {
		capacity = c.Capacity()
		w = c.shapes.workload()
		var top policy.Constraint
		for _, s := range w {
			top = max(top, s.Constraint)
		}
		if top > 0 {
			w = w.ByScarcity(c.reach(int(top) + 1))
		}
	}
	return wa.WithWorkload(w, capacity)
}

// Capacity is what the known nodes offer in all: the units of their healthy cards and, with
// Config.TrackWorkload, their allocatable CPU (millicores) and memory (MiB). Units are those
// of the unit size holding most of the cards' memory, nodes publishing another size
// converted to it (capacityBook.units); nodes whose inventory is out of range count nothing.
// Kept by the node handlers; O(unit sizes).
func (c *Cache) Capacity() policy.Capacity {
	out := policy.Capacity{Units: c.capacity.units()}
	if c.hosts != nil {
		out.Host = c.hosts.capacity()
	}
	return out
}

// reach is policy.ReachOf over every node the cache knows, for constraints 0..n-1.
func (c *Cache) reach(n int) policy.Reach {
	var r policy.ReachCounter
	c.mu.RLock()
	defer c.mu.RUnlock()
	for name, st := range c.nodes {
		_, unmet, _ := c.hosts.free(name)
		st.mu.Lock()
		if st.known {
			r.Add(policy.Node{Cards: st.cards, Unmet: unmet})
		}
		st.mu.Unlock()
	}
	return r.Reach(n)
}

// HostRequest is the pod's effective CPU and memory request, as policy.Scorer wants it.
func HostRequest(pod *corev1.Pod) policy.Host { return hostRequest(pod) }

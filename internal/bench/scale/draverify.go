package scale

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// ClaimCheck is the per-card accounting rebuilt from the bench claims' allocations.
type ClaimCheck struct {
	// Claims is the number of claims of bound pods checked.
	Claims int `json:"claims"`
	// Nodes is the number of nodes whose cards hold them: fewer under a packing score
	// than under kube-scheduler's own spreading.
	Nodes int `json:"nodes"`
	// Over lists "pool/device: used > capacity" (GiB) for every card whose claims together
	// consume more memory than its capacity.
	Over []string `json:"over"`
	// Unallocated lists bound pods whose claim is missing, not allocated or not reserved
	// for the pod.
	Unallocated []string `json:"unallocated"`
	// Mismatched lists bound pods whose allocation is not what the claim asked: a card of
	// another node, the same card twice, or another amount of memory than asked.
	Mismatched []string `json:"mismatched"`
}

// OK is true when every claim is allocated as asked and no card is over its capacity.
func (c ClaimCheck) OK() bool {
	return len(c.Over) == 0 && len(c.Unallocated) == 0 && len(c.Mismatched) == 0
}

// checkClaims checks the claims of the bound pods (claims by namespace/name): each is
// allocated and reserved for its pod, on cards of the pod's node, one card per device asked,
// each consuming what the request asked; and the memory consumed per card (pool/device,
// summed over all claims) is at most capacityBytes. Pods not bound are skipped.
func checkClaims(pods []*corev1.Pod, claims map[string]*resourceapi.ResourceClaim, capacityBytes int64) ClaimCheck {
	c := ClaimCheck{Over: []string{}, Unallocated: []string{}, Mismatched: []string{}}
	capacity := capacityBytes / unitBytes() // a card's GiB units
	used := map[string]int64{}              // pool/device → GiB units
	nodes := map[string]bool{}
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			continue
		}
		for _, ref := range p.Spec.ResourceClaims {
			if ref.ResourceClaimName == nil {
				continue
			}
			c.Claims++
			claim := claims[p.Namespace+"/"+*ref.ResourceClaimName]
			if claim == nil || claim.Status.Allocation == nil || !reservedFor(claim, p) {
				c.Unallocated = append(c.Unallocated, p.Name)
				continue
			}
			if why := allocationMismatch(claim, p.Spec.NodeName); why != "" {
				c.Mismatched = append(c.Mismatched, p.Name+": "+why)
			}
			for i := range claim.Status.Allocation.Devices.Results {
				// Read as the scheduler plugin reads it: no consumed memory is the whole card.
				r := &claim.Status.Allocation.Devices.Results[i]
				u, err := gpushare.DRAConsumedUnits(r, gpushare.GiB, capacity)
				if err != nil {
					c.Mismatched = append(c.Mismatched, fmt.Sprintf("%s: device %s: %v", p.Name, r.Device, err))
					u = capacity
				}
				used[r.Pool+"/"+r.Device] += u
				nodes[r.Pool] = true
			}
		}
	}
	c.Nodes = len(nodes)
	for card, u := range used {
		if u > capacity {
			c.Over = append(c.Over, fmt.Sprintf("%s: %d > %d", card, u, capacity))
		}
	}
	sort.Strings(c.Over)
	sort.Strings(c.Unallocated)
	sort.Strings(c.Mismatched)
	return c
}

// reservedFor is true when claim's status reserves it for pod (by UID).
func reservedFor(claim *resourceapi.ResourceClaim, pod *corev1.Pod) bool {
	for _, r := range claim.Status.ReservedFor {
		if r.Resource == "pods" && r.UID == pod.UID {
			return true
		}
	}
	return false
}

// allocationMismatch says how claim's allocation differs from what its one request asked on
// node; "" when it does not.
func allocationMismatch(claim *resourceapi.ResourceClaim, node string) string {
	results := claim.Status.Allocation.Devices.Results
	var want int64
	var wantMem int64
	for _, r := range claim.Spec.Devices.Requests {
		if r.Exactly == nil {
			continue
		}
		want += r.Exactly.Count
		if r.Exactly.Capacity != nil {
			q := r.Exactly.Capacity.Requests[gpushare.DRACapacityMemory]
			wantMem = q.Value()
		}
	}
	if int64(len(results)) != want {
		return fmt.Sprintf("%d devices, asked %d", len(results), want)
	}
	seen := map[string]bool{}
	for _, r := range results {
		if r.Pool != node {
			return fmt.Sprintf("device %s/%s is not on node %s", r.Pool, r.Device, node)
		}
		if seen[r.Device] {
			return fmt.Sprintf("device %s twice", r.Device)
		}
		seen[r.Device] = true
		if got := r.ConsumedCapacity[gpushare.DRACapacityMemory]; got.Value() != wantMem {
			return fmt.Sprintf("device %s consumes %s, asked %d bytes", r.Device, got.String(), wantMem)
		}
	}
	return ""
}

package schedulerplugin

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// draShare is one device request of a pod's gpushare claims: cards distinct cards, each
// with bytes of memory.
type draShare struct {
	bytes int64 // -1: no memory request, the request policy's default
	cards int   // 0: every card of the node (allocationMode All)
}

// draRequest is what a pod's unallocated gpushare claims ask, in the pod's claim order and
// each claim's request order (the order the allocator places them in); empty for a pod
// without such claims.
type draRequest []draShare

// readDRARequest reads the pod's gpushare claims (requests of DeviceClass
// gpushare.DRADriverName) through the scheduler's claim tracker, which includes the
// allocations the DynamicResources plugin has made but not yet written. A claim already
// allocated asks nothing new, and neither does one not created yet (DynamicResources keeps
// the pod waiting for it). Of a prioritized list (firstAvailable) only the first
// subrequest counts, the one the allocator tries first. Errors: the tracker failing.
func readDRARequest(pod *v1.Pod, claims fwk.ResourceClaimTracker) (draRequest, error) {
	var out draRequest
	seen := map[string]bool{}
	for _, pc := range pod.Spec.ResourceClaims {
		name := podClaimName(pod, pc)
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		cl, err := claims.Get(pod.Namespace, name)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading claim %s/%s of pod %s: %w", pod.Namespace, name, pod.Name, err)
		}
		if cl == nil || cl.Status.Allocation != nil {
			continue
		}
		for _, r := range cl.Spec.Devices.Requests {
			if sh, ok := requestShare(r); ok {
				out = append(out, sh)
			}
		}
	}
	return out, nil
}

// podClaimName is the ResourceClaim behind one of the pod's claim entries: the claim it
// names, or the one generated from its template (pod status), "" while none is.
func podClaimName(pod *v1.Pod, pc v1.PodResourceClaim) string {
	if pc.ResourceClaimName != nil {
		return *pc.ResourceClaimName
	}
	for _, st := range pod.Status.ResourceClaimStatuses {
		if st.Name == pc.Name && st.ResourceClaimName != nil {
			return *st.ResourceClaimName
		}
	}
	return ""
}

// requestShare is r as a share, ok false where r does not ask the gpushare DeviceClass.
func requestShare(r resourceapi.DeviceRequest) (draShare, bool) {
	class, mode, count, capa := "", resourceapi.DeviceAllocationMode(""), int64(0), (*resourceapi.CapacityRequirements)(nil)
	switch {
	case r.Exactly != nil:
		class, mode, count, capa = r.Exactly.DeviceClassName, r.Exactly.AllocationMode, r.Exactly.Count, r.Exactly.Capacity
	case len(r.FirstAvailable) > 0:
		sr := r.FirstAvailable[0]
		class, mode, count, capa = sr.DeviceClassName, sr.AllocationMode, sr.Count, sr.Capacity
	}
	if class != gpushare.DRADriverName {
		return draShare{}, false
	}
	sh := draShare{bytes: -1, cards: int(min(max(count, 1), maxDRACards))}
	if mode == resourceapi.DeviceAllocationModeAll {
		sh.cards = 0
	}
	if capa != nil {
		if q, ok := capa.Requests[gpushare.DRACapacityMemory]; ok {
			b, valid := quantityBytes(&q)
			if !valid {
				b = maxDRABytes // more than any card: fits nowhere
			}
			sh.bytes = b
		}
	}
	return sh, true
}

// maxDRACards is the most devices one request gets (the API's AllocationResultsMaxSize).
const maxDRACards = resourceapi.AllocationResultsMaxSize

// errNoDRAUnit: the node's slices give no unit to count a request in.
var errNoDRAUnit = errors.New("no readable memory request policy")

// podRequest is r on node n: each share's memory rounded up to the node's unit (at least
// one unit, as the request policy's minimum), as gpushare.PodRequest containers that all
// run together. Errors: a node without a unit, a share larger than any card can be.
func (r draRequest) podRequest(n *draNode) (gpushare.PodRequest, error) {
	if n.unit <= 0 {
		return gpushare.PodRequest{}, errNoDRAUnit
	}
	req := gpushare.PodRequest{Containers: make([]gpushare.ContainerRequest, 0, len(r))}
	for i, sh := range r {
		units := n.defUnits
		if sh.bytes >= 0 {
			units = max(ceilDiv(sh.bytes, n.unit), 1)
		}
		cards := sh.cards
		if cards == 0 {
			cards = max(len(n.cards), 1)
		}
		if units > gpushare.MaxContainerUnits/int64(cards) {
			return gpushare.PodRequest{}, fmt.Errorf("request %d: %d units on each of %d cards is more than a card holds", i, units, cards)
		}
		req.Containers = append(req.Containers, gpushare.ContainerRequest{
			Ref: gpushare.ContainerRef{Index: i}, Name: fmt.Sprintf("claim-request-%d", i),
			Units: units * int64(cards), Cards: cards,
		})
	}
	return req, nil
}

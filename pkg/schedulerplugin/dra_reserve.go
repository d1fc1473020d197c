package schedulerplugin

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// watchClaims hands the index (draIndex.watch) the pod's claims that hold gpushare devices
// in the scheduler's claim tracker only: DynamicResources allocates them in its Reserve,
// which runs before this plugin's, and the informer delivers the allocation only after
// its PreBind has written it. Scoring the next pods meanwhile counts them as the DRA
// allocator does.
func (p *Plugin) watchClaims(pod *v1.Pod) {
	if p.draIndex == nil || len(pod.Spec.ResourceClaims) == 0 {
		return
	}
	tracker := p.dra.ResourceClaims()
	var keys []types.NamespacedName
	var uids []types.UID
	for _, key := range podClaimKeys(pod) {
		cl, err := tracker.Get(key.Namespace, key.Name)
		if err != nil || cl == nil {
			continue // not created yet: DynamicResources has allocated nothing for it
		}
		a := cl.Status.Allocation
		if a == nil {
			a = tracker.GetPendingAllocation(cl.UID)
		}
		if len(gpusharePools(a)) > 0 {
			keys, uids = append(keys, key), append(uids, cl.UID)
		}
	}
	if len(keys) > 0 {
		p.draIndex.watch(keys, uids)
	}
}

// unwatchClaims undoes watchClaims when the pod's Reserve is undone.
func (p *Plugin) unwatchClaims(pod *v1.Pod) {
	if p.draIndex != nil && len(pod.Spec.ResourceClaims) > 0 {
		p.draIndex.unwatch(podClaimKeys(pod))
	}
}

// podClaimKeys are the pod's ResourceClaims that exist by name (podClaimName), each once.
func podClaimKeys(pod *v1.Pod) []types.NamespacedName {
	var out []types.NamespacedName
	for _, pc := range pod.Spec.ResourceClaims {
		if name := podClaimName(pod, pc); name != "" {
			key := types.NamespacedName{Namespace: pod.Namespace, Name: name}
			if !slices.Contains(out, key) {
				out = append(out, key)
			}
		}
	}
	return out
}

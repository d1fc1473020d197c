package nodecards

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// PodsIn returns the pods a pod informer's store holds, in the store's order; anything else
// the store holds is skipped.
func PodsIn(store cache.Store) []*corev1.Pod {
	objs := store.List()
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if pod, ok := o.(*corev1.Pod); ok {
			out = append(out, pod)
		}
	}
	return out
}

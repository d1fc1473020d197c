package scale

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpushare/gpushare/internal/bench/objects"
	"github.com/gpushare/gpushare/pkg/dra"
	"github.com/gpushare/gpushare/pkg/gpushare"
)

// draRequest is the one device request of every bench claim; the pod's container names the
// claim by draClaimRef.
const (
	draRequest  = "gpu"
	draClaimRef = "gpu"
)

// unitBytes is one gpu-mem unit of the bench's nodes in bytes (1 GiB).
func unitBytes() int64 { return gpushare.GiB.MiB << 20 }

// ResourceSlice is what the DRA back end's kubelet plugin publishes for bench node node:
// pkg/dra's DriverResources over Node's inventory (Cards × CardUnits GiB, the same UUIDs),
// one pool named after the node, generation 1, one slice. Errors: the
// inventory pkg/dra refuses.
func (o Objects) ResourceSlice(node string) (*resourceapi.ResourceSlice, error) {
	res, err := dra.DriverResources(node, o.nodeSpec(node).Inventory(), nil)
	if err != nil {
		return nil, fmt.Errorf("building the ResourceSlice of node %s: %w", node, err)
	}
	pool := res.Pools[node]
	if len(pool.Slices) != 1 {
		return nil, fmt.Errorf("node %s: %d slices in its pool, want 1", node, len(pool.Slices))
	}
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + gpushare.DRADriverName, Labels: map[string]string{LabelSet: "nodes"}},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   gpushare.DRADriverName,
			Pool:     resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(node),
			Devices:  pool.Slices[0].Devices,
		},
	}, nil
}

// Claim is the ResourceClaim of pod i of set with shape s: one request of the class
// DeviceClass for s.Cards devices, each consuming s.Units/s.Cards GiB of memory; two cards
// must differ in uuid (distinctAttribute), as the DRA examples' two-card claim does.
// Named as the pod, labelled LabelSet=set.
func (o Objects) Claim(set string, i int, s PodShape) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: podName(set, i), Namespace: o.Namespace, Labels: map[string]string{LabelSet: set}},
		Spec:       objects.MemoryClaimSpec(draRequest, s.Cards, s.Units/max(s.Cards, 1)*unitBytes()),
	}
}

// DRAPod is pod i of set asking for its memory through Claim(set, i, s) instead of gpu-mem:
// the pod names the claim, its container the pod's claim entry.
func (o Objects) DRAPod(set string, i int, s PodShape) *corev1.Pod {
	p := o.Pod(set, i, PodShape{})
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: draClaimRef, ResourceClaimName: ptr.To(podName(set, i))}}
	p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: draClaimRef}}
	return p
}

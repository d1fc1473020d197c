package replay

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpushare/gpushare/internal/bench/objects"
	"github.com/gpushare/gpushare/pkg/dra"
	"github.com/gpushare/gpushare/pkg/gpushare"
)

// draRequest is the one request of a replay pod's ResourceClaim, and the pod's claim name.
const draRequest = "gpu"

// draUnit is the unit of every card's memory capacity on a DRA replay: a claim asks bytes,
// so a unit must be the same size on every model a pod may land on. With milli units that
// is 1 MiB (a card publishes 1000 MiB, a thousandth of a card per MiB), with GiB units a
// GiB (each model its own number of them).
func (o Objects) draUnit() gpushare.Unit {
	if o.Units.Mode() == UnitGiB {
		return gpushare.GiB
	}
	return gpushare.Unit{MiB: 1}
}

// draUnitBytes is draUnit in bytes.
func (o Objects) draUnitBytes() int64 { return o.draUnit().MiB << 20 }

// draNode is Node for a DRA replay: the node of the device-plugin path without its
// gpu-mem and gpu-count resources and inventory (no device plugin serves it), labelled
// gpushare.io/backend=dra, and the ResourceSlice its DRA plugin would publish (pkg/dra's
// DriverResources: one device per card, memory capacity the card's units × draUnit in
// bytes, in steps of one unit, shared by many claims). The slice carries LabelReplay.
func (o Objects) draNode(n NodeSpec) (*corev1.Node, *resourceapi.ResourceSlice, error) {
	node, err := o.Node(n)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range []corev1.ResourceName{o.Resources.Mem, o.Resources.Count} {
		delete(node.Status.Capacity, r)
		delete(node.Status.Allocatable, r)
	}
	delete(node.Annotations, gpushare.AnnotationNodeInventory)
	node.Labels[gpushare.LabelBackend] = string(gpushare.BackendDRA)
	inv := gpushare.Inventory{Unit: o.draUnit()}
	for i := range n.GPUs {
		inv.Devices = append(inv.Devices, gpushare.Device{
			Index: i, UUID: fmt.Sprintf("GPU-%s-%d", n.Name, i), Model: n.Model,
			Units: o.Units.CardUnits(n.Model), MemoryMiB: modelMemoryMiB[n.Model], Healthy: true,
		})
	}
	res, err := dra.DriverResources(n.Name, inv, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("slice of node %s: %w", n.Name, err)
	}
	slice := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name + "-" + strings.ReplaceAll(gpushare.DRADriverName, ".", "-"), Labels: map[string]string{LabelReplay: "true"}},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   gpushare.DRADriverName,
			Pool:     resourceapi.ResourcePool{Name: n.Name, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(n.Name),
			Devices:  res.Pools[n.Name].Slices[0].Devices,
		},
	}
	return node, slice, nil
}

// draPod is Pod for a DRA replay: a GPU pod asks its cards in a ResourceClaim of the same
// name instead of gpu-mem, which the pod names and its container uses: num_gpu devices of
// the class, each consuming the pod's units per card (a whole card: all its units), apart
// by UUID, in draUnit. A CPU-only pod gets no claim (nil).
func (o Objects) draPod(p PodSpec) (*corev1.Pod, *resourceapi.ResourceClaim, error) {
	cpuOnly := p
	cpuOnly.NumGPU, cpuOnly.GPUMilli = 0, 0
	pod, err := o.Pod(cpuOnly)
	if err != nil || p.NumGPU == 0 {
		return pod, nil, err
	}
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, Labels: map[string]string{LabelReplay: "true"}},
		Spec:       objects.MemoryClaimSpec(draRequest, int64(p.NumGPU), o.Units.PodUnitsPerCard(p)*o.draUnitBytes()),
	}
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: draRequest, ResourceClaimName: ptr.To(claim.Name)}}
	pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: draRequest}}
	return pod, claim, nil
}

// claimedUnits is the memory claim's allocation consumes on the driver's devices, in
// draUnit; 0 when it is not allocated. Each result is read as the scheduler plugin reads it
// (gpushare.DRAConsumedUnits): a result without consumed capacity (a scheduler without
// consumable capacity) takes the whole card, cardUnits, and so does one whose consumed
// memory is not whole units (fail closed).
func (o Objects) claimedUnits(claim *resourceapi.ResourceClaim, cardUnits int64) int64 {
	if claim.Status.Allocation == nil {
		return 0
	}
	var units int64
	for i := range claim.Status.Allocation.Devices.Results {
		r := &claim.Status.Allocation.Devices.Results[i]
		if r.Driver != gpushare.DRADriverName {
			continue
		}
		u, err := gpushare.DRAConsumedUnits(r, o.draUnit(), cardUnits)
		if err != nil {
			u = cardUnits
		}
		units += u
	}
	return units
}

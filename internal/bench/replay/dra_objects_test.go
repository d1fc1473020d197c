package replay

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/gpushare/gpushare/internal/bench/objects"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

func draObjects(t *testing.T, nodes []NodeSpec) Objects {
	t.Helper()
	units, err := newUnits(UnitMilli, nodes)
	if err != nil {
		t.Fatal(err)
	}
	return Objects{Units: units, Resources: gpushare.DefaultResources(), Namespace: "replay", DRA: true}
}

func TestDRAObjects(t *testing.T) {
	spec := NodeSpec{Name: "n0", MilliCPU: 64000, MemoryMiB: 65536, GPUs: 2, Model: "T4"}
	o := draObjects(t, []NodeSpec{spec})
	node, slice, err := o.draNode(spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := node.Status.Allocatable[o.Resources.Mem]; ok || node.Annotations[gpushare.AnnotationNodeInventory] != "" || node.Labels[gpushare.LabelBackend] != "dra" {
		t.Errorf("DRA node offers gpu-mem or an inventory, or lacks the backend label: %v %v %v", node.Status.Allocatable, node.Annotations, node.Labels)
	}
	if slice.Spec.Driver != gpushare.DRADriverName || slice.Spec.Pool.Name != "n0" || *slice.Spec.NodeName != "n0" || len(slice.Spec.Devices) != 2 {
		t.Fatalf("slice %+v", slice.Spec)
	}
	memory := slice.Spec.Devices[1].Capacity[gpushare.DRACapacityMemory]
	if slice.Spec.Devices[1].Name != "gpu-1" || memory.Value.Cmp(resource.MustParse("1000Mi")) != 0 || memory.RequestPolicy.ValidRange.Step.Cmp(resource.MustParse("1Mi")) != 0 {
		t.Errorf("device %s: memory %s step %s, want gpu-1: 1000Mi in steps of 1Mi", slice.Spec.Devices[1].Name, &memory.Value, memory.RequestPolicy.ValidRange.Step)
	}

	pod, claim, err := o.draPod(PodSpec{Name: "P_1", MilliCPU: 1000, MemoryMiB: 1024, NumGPU: 2, GPUMilli: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := pod.Spec.Containers[0].Resources.Requests[o.Resources.Mem]; ok {
		t.Errorf("DRA pod asks gpu-mem: %v", pod.Spec.Containers[0].Resources.Requests)
	}
	if claim.Name != "p-1" || *pod.Spec.ResourceClaims[0].ResourceClaimName != "p-1" || pod.Spec.Containers[0].Resources.Claims[0].Name != draRequest {
		t.Errorf("pod does not use claim %s: %+v %+v", claim.Name, pod.Spec.ResourceClaims, pod.Spec.Containers[0].Resources.Claims)
	}
	req := claim.Spec.Devices.Requests[0].Exactly
	asked := req.Capacity.Requests[gpushare.DRACapacityMemory]
	if req.Count != 2 || asked.Cmp(resource.MustParse("1000Mi")) != 0 || len(claim.Spec.Devices.Constraints) != 1 ||
		*claim.Spec.Devices.Constraints[0].DistinctAttribute != "gpu-mem.gpushare.io/uuid" {
		t.Errorf("claim %+v", claim.Spec.Devices)
	}
	if _, claim, _ := o.draPod(PodSpec{Name: "cpu", MilliCPU: 1000}); claim != nil {
		t.Errorf("CPU-only pod got a claim")
	}

	claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		{Driver: gpushare.DRADriverName, Device: "gpu-0", ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{gpushare.DRACapacityMemory: resource.MustParse("300Mi")}},
		{Driver: gpushare.DRADriverName, Device: "gpu-1"}, // no consumed capacity: the whole card
		{Driver: "other", Device: "x"},
	}}}
	if got := o.claimedUnits(claim, 1000); got != 1300 {
		t.Errorf("claimed %d units, want 1300", got)
	}
}

// TestDRAAllocatorIsFirstFit runs kube-scheduler's own DRA allocator (v0.37.2, consumable
// capacity on) on a replay node's slice and replay pods' claims, one after the other, and
// checks it picks the cards policy.FirstFit does, the card choice of the DRA emulations.
func TestDRAAllocatorIsFirstFit(t *testing.T) {
	spec := NodeSpec{Name: "n0", MilliCPU: 64000, MemoryMiB: 65536, GPUs: 4, Model: "V100M32"}
	o := draObjects(t, []NodeSpec{spec})
	_, slice, err := o.draNode(spec)
	if err != nil {
		t.Fatal(err)
	}
	state := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	nodes, _ := newOfflineNodes(o.Units, []NodeSpec{spec})
	ours := nodes[0].policy
	class := objects.DeviceClass()
	// x goes to card 0, the first with room, where best fit would take card 1 (200 left);
	// d takes the two empty cards; f fits nowhere.
	for i, p := range []PodSpec{
		gpuPod("a", 1, 300), gpuPod("b", 1, 800), gpuPod("x", 1, 100), gpuPod("c", 1, 600),
		gpuPod("d", 2, 1000), gpuPod("e", 1, 200), gpuPod("f", 1, 500),
	} {
		_, claim, err := o.draPod(p)
		if err != nil {
			t.Fatal(err)
		}
		claim.UID = types.UID(fmt.Sprint(i))
		a, err := structured.NewAllocator(context.Background(),
			structured.Features{ConsumableCapacity: true, DeviceTaints: true, PartitionableDevices: true, PrioritizedList: true},
			state, oneClass{class}, []*resourceapi.ResourceSlice{slice}, cel.NewCache(10, cel.Features{EnableConsumableCapacity: true}))
		if err != nil {
			t.Fatal(err)
		}
		out, err := a.Allocate(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: spec.Name}}, []*resourceapi.ResourceClaim{claim})
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		pl, fitErr := policy.FirstFit(ours, podRequest(o.Units, p))
		if len(out) == 0 {
			if fitErr == nil {
				t.Errorf("%s: the allocator finds no room, FirstFit places it on %v", p.Name, pl.Usage)
			}
			continue
		}
		got := gpushare.CardUnits{}
		for _, r := range out[0].Devices.Results {
			id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
			state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
			state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
			var idx int
			if _, err := fmt.Sscanf(r.Device, "gpu-%d", &idx); err != nil {
				t.Fatal(err)
			}
			q := r.ConsumedCapacity[gpushare.DRACapacityMemory]
			got[idx] = q.Value() >> 20
		}
		if fitErr != nil {
			t.Fatalf("%s: the allocator places it on %v, FirstFit: %v", p.Name, got, fitErr)
		}
		if diff := cmp.Diff(pl.Usage, got); diff != "" {
			t.Errorf("%s: allocator's cards (-FirstFit,+allocator):\n%s", p.Name, diff)
		}
		for k := range ours.Cards {
			ours.Cards[k].Used += pl.Usage[ours.Cards[k].Index]
		}
	}
}

// oneClass is the allocator's DeviceClass lister for the replay's one class.
type oneClass struct{ *resourceapi.DeviceClass }

func (c oneClass) List() ([]*resourceapi.DeviceClass, error) {
	return []*resourceapi.DeviceClass{c.DeviceClass}, nil
}

func (c oneClass) Get(name string) (*resourceapi.DeviceClass, error) {
	if name != c.Name {
		return nil, fmt.Errorf("no DeviceClass %s", name)
	}
	return c.DeviceClass, nil
}

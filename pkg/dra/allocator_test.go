package dra

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// These tests run kube-scheduler's own DRA allocator (v0.37.2, the features on by default
// in 1.37) on the slices DriverResources builds: what a claim consumes, and what a pod's
// aliyun.com/gpu-mem: N becomes through a DeviceClass's extendedResourceName.

type classLister map[string]*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	var out []*resourceapi.DeviceClass
	for _, c := range l {
		out = append(out, c)
	}
	return out, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := l[name]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("no DeviceClass %s", name)
}

// t4s is n T4s of 14 GiB units; the cards listed in sick are unhealthy.
func t4s(n int, sick ...int) gpushare.Inventory {
	inv := gpushare.Inventory{Unit: gpushare.GiB}
	for i := range n {
		inv.Devices = append(inv.Devices, gpushare.Device{Index: i, UUID: fmt.Sprintf("GPU-%d", i), Model: "Tesla T4", Units: 14, Healthy: !slices.Contains(sick, i)})
	}
	return inv
}

// allocate allocates claim on a node with the cards of inv, the claims already allocated
// (allocated) holding their consumed capacity; nil: it does not fit.
func allocate(t *testing.T, inv gpushare.Inventory, allocated []resourceapi.AllocationResult, claim *resourceapi.ResourceClaim) *resourceapi.AllocationResult {
	t.Helper()
	res, err := DriverResources(testNode, inv, nil)
	if err != nil {
		t.Fatal(err)
	}
	slice := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: testNode + "-gpu"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   gpushare.DRADriverName,
			Pool:     resourceapi.ResourcePool{Name: testNode, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptrTo(testNode),
			Devices:  res.Pools[testNode].Slices[0].Devices,
		},
	}
	state := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for _, a := range allocated {
		for _, r := range a.Devices.Results {
			id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
			state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
			state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
		}
	}
	class := &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: gpushare.DRADriverName},
		Spec: resourceapi.DeviceClassSpec{
			Selectors:            []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "` + gpushare.DRADriverName + `"`}}},
			ExtendedResourceName: ptrTo(string(gpushare.DefaultMemResource)),
		},
	}
	features := structured.Features{ConsumableCapacity: true, DeviceTaints: true, PartitionableDevices: true, PrioritizedList: true, AdminAccess: true}
	a, err := structured.NewAllocator(context.Background(), features, state, classLister{class.Name: class},
		[]*resourceapi.ResourceSlice{slice}, cel.NewCache(10, cel.Features{EnableConsumableCapacity: true}))
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}}
	out, err := a.Allocate(context.Background(), node, []*resourceapi.ResourceClaim{claim})
	if err != nil {
		t.Fatalf("Allocate: %v", err)
	}
	if len(out) == 0 {
		return nil
	}
	return &out[0]
}

func ptrTo[T any](v T) *T { return &v }

// memoryClaim asks count devices of the class, each consuming memory ("" : no capacity
// request, as the scheduler's claim for an extended resource is).
func memoryClaim(count int64, memory string) *resourceapi.ResourceClaim {
	req := &resourceapi.ExactDeviceRequest{DeviceClassName: gpushare.DRADriverName, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}
	if memory != "" {
		req.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{gpushare.DRACapacityMemory: resource.MustParse(memory)}}
	}
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "c", UID: types.UID("claim")},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
			{Name: "container-0-request-0", Exactly: req},
		}}},
	}
}

// summary is an allocation as device:consumed memory, in result order.
func summary(a *resourceapi.AllocationResult) []string {
	if a == nil {
		return nil
	}
	var out []string
	for _, r := range a.Devices.Results {
		q := r.ConsumedCapacity[gpushare.DRACapacityMemory]
		out = append(out, r.Device+":"+q.String())
	}
	return out
}

func TestAllocatorOnOurSlices(t *testing.T) {
	tests := []struct {
		name  string
		inv   gpushare.Inventory
		claim *resourceapi.ResourceClaim
		want  []string // nil: unschedulable on the node
	}{
		{name: "a 4Gi claim consumes 4Gi of one card", inv: t4s(1), claim: memoryClaim(1, "4Gi"), want: []string{"gpu-0:4Gi"}},
		{name: "part of a unit rounds up to the step", inv: t4s(1), claim: memoryClaim(1, "1500Mi"), want: []string{"gpu-0:2Gi"}},
		{name: "more than a card does not fit", inv: t4s(2), claim: memoryClaim(1, "15Gi")},
		// What the extended-resource mapping makes of aliyun.com/gpu-mem: N: N devices,
		// no capacity request, so each consumes the request policy's default, one unit.
		{name: "gpu-mem: 1 is one unit of one card", inv: t4s(1), claim: memoryClaim(1, ""), want: []string{"gpu-0:1Gi"}},
		{name: "gpu-mem: 4 on one card does not fit", inv: t4s(1), claim: memoryClaim(4, "")},
		{name: "gpu-mem: 4 on four cards is one unit of each", inv: t4s(4), claim: memoryClaim(4, ""), want: []string{"gpu-0:1Gi", "gpu-1:1Gi", "gpu-2:1Gi", "gpu-3:1Gi"}},
		{name: "a tainted card is avoided", inv: t4s(2, 0), claim: memoryClaim(1, "4Gi"), want: []string{"gpu-1:4Gi"}},
		{name: "no untainted card left", inv: t4s(1, 0), claim: memoryClaim(1, "4Gi")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := summary(allocate(t, tt.inv, nil, tt.claim))
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("allocation %v, want %v", got, tt.want)
			}
		})
	}
}

// TestAllocatorSharesACard: the reference notebooks, three 4Gi claims on one 14 GiB card,
// and a fourth that does not fit beside them.
func TestAllocatorSharesACard(t *testing.T) {
	var held []resourceapi.AllocationResult
	for i := range 4 {
		a := allocate(t, t4s(1), held, memoryClaim(1, "4Gi"))
		if i < 3 {
			if a == nil {
				t.Fatalf("claim %d does not fit beside %d", i+1, len(held))
			}
			held = append(held, *a)
			continue
		}
		if a != nil {
			t.Errorf("the fourth 4Gi claim fits beside 12 of 14 GiB: %v", summary(a))
		}
	}
}

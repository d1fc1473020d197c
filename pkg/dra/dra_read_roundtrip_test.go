package dra

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

// TestDriverResourcesReadBack publishes inventories with DriverResources and reads the slice
// back with pkg/gpushare's reader, as the scheduler plugin, inspect and the bench tools do:
// the cards must come back exactly, so publisher and reader cannot drift.
func TestDriverResourcesReadBack(t *testing.T) {
	tests := []struct {
		name    string
		inv     gpushare.Inventory
		lastXID map[string]uint64
	}{
		{
			name: "GiB, one card unhealthy (NoSchedule) and one fallen off the bus (NoExecute)",
			inv: gpushare.Inventory{Unit: gpushare.GiB, Devices: []gpushare.Device{
				{Index: 0, UUID: "GPU-a", Model: "Tesla T4", Units: 14, MemoryMiB: 15079, Healthy: true},
				{Index: 1, UUID: "GPU-b", Model: "Tesla T4", Units: 14, MemoryMiB: 15079, Healthy: false},
				{Index: 3, UUID: "GPU-c", Model: "NVIDIA A100-SXM4-40GB", Units: 39, MemoryMiB: 40536, Healthy: false},
			}},
			lastXID: map[string]uint64{"GPU-b": 48, "GPU-c": gpunvml.XIDFallenOffBus},
		},
		{
			name: "256MiB units",
			inv: gpushare.Inventory{Unit: gpushare.Unit{MiB: 256}, Devices: []gpushare.Device{
				{Index: 0, UUID: "GPU-a", Model: "Tesla T4", Units: 58, MemoryMiB: 15079, Healthy: true},
			}},
		},
		{
			name: "zero unit publishes GiB",
			inv: gpushare.Inventory{Devices: []gpushare.Device{
				{Index: 2, UUID: "GPU-z", Model: "Tesla T4", Units: 14, MemoryMiB: 15079, Healthy: true},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := DriverResources("node-a", tt.inv, tt.lastXID)
			if err != nil {
				t.Fatalf("DriverResources: %v", err)
			}
			node := "node-a"
			slice := &resourceapi.ResourceSlice{
				ObjectMeta: metav1.ObjectMeta{Name: "node-a-slice"},
				Spec: resourceapi.ResourceSliceSpec{
					Driver: gpushare.DRADriverName, NodeName: &node,
					Pool:    resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
					Devices: res.Pools[node].Slices[0].Devices,
				},
			}
			pools := gpushare.DRANewestPools([]*resourceapi.ResourceSlice{slice}, nil)
			if len(pools[node]) != 1 {
				t.Fatalf("DRANewestPools = %v, want the one slice in pool %s", pools, node)
			}
			wantUnit := tt.inv.Unit
			if wantUnit.MiB == 0 {
				wantUnit = gpushare.GiB
			}
			unit, err := gpushare.DRASliceUnit(slice)
			if err != nil || unit != wantUnit {
				t.Fatalf("DRASliceUnit = %v, %v; want %v", unit, err, wantUnit)
			}
			var got []gpushare.Device
			for i := range slice.Spec.Devices {
				c, err := gpushare.ReadDRACard(&slice.Spec.Devices[i])
				if err != nil {
					t.Fatalf("ReadDRACard(%s): %v", slice.Spec.Devices[i].Name, err)
				}
				if c.Device != DeviceName(c.Index) || c.Unit != wantUnit || c.MiB != c.Units*wantUnit.MiB || c.DefaultUnits != 1 {
					t.Errorf("card %+v: want device %s, unit %v, MiB = units × unit, default one unit", c, DeviceName(c.Index), wantUnit)
				}
				// MemoryMiB is NVML's figure, which the slice does not carry: it publishes whole units.
				got = append(got, gpushare.Device{Index: c.Index, UUID: c.UUID, Model: c.Model, Units: c.Units, Healthy: c.Healthy})
			}
			want := make([]gpushare.Device, len(tt.inv.Devices))
			for i, d := range tt.inv.Devices {
				d.MemoryMiB = 0
				want[i] = d
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("cards read back (-published +read):\n%s", diff)
			}
			// A claim result as the allocator records it: a share of units, or none (the whole card).
			r := resourceapi.DeviceRequestAllocationResult{Driver: gpushare.DRADriverName, Pool: node, Device: slice.Spec.Devices[0].Name}
			if u, err := gpushare.DRAConsumedUnits(&r, unit, tt.inv.Devices[0].Units); err != nil || u != tt.inv.Devices[0].Units {
				t.Errorf("DRAConsumedUnits(no consumed capacity) = %d, %v; want the whole card, %d", u, err, tt.inv.Devices[0].Units)
			}
			step := slice.Spec.Devices[0].Capacity[gpushare.DRACapacityMemory].RequestPolicy.ValidRange.Step
			r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{gpushare.DRACapacityMemory: *step}
			if u, err := gpushare.DRAConsumedUnits(&r, unit, tt.inv.Devices[0].Units); err != nil || u != 1 {
				t.Errorf("DRAConsumedUnits(one step) = %d, %v; want 1", u, err)
			}
		})
	}
}

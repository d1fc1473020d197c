package dra

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

func TestDriverResources(t *testing.T) {
	t4 := func(index int, uuid string, healthy bool) gpushare.Device {
		return gpushare.Device{Index: index, UUID: uuid, Model: "Tesla T4", Units: 14, MemoryMiB: 15079, Healthy: healthy}
	}
	type wantDevice struct {
		name, uuid        string
		memory, step, def string
		taint             resourceapi.DeviceTaintEffect // "" none
		taintValue        string
	}
	tests := []struct {
		name    string
		inv     gpushare.Inventory
		lastXID map[string]uint64
		want    []wantDevice
		wantErr bool
	}{
		{
			name: "two healthy T4s in GiB",
			inv:  gpushare.Inventory{Unit: gpushare.GiB, Devices: []gpushare.Device{t4(0, "GPU-a", true), t4(1, "GPU-b", true)}},
			want: []wantDevice{
				{name: "gpu-0", uuid: "GPU-a", memory: "14Gi", step: "1Gi", def: "1Gi"},
				{name: "gpu-1", uuid: "GPU-b", memory: "14Gi", step: "1Gi", def: "1Gi"},
			},
		},
		{
			name: "256MiB units count whole units only",
			inv:  gpushare.Inventory{Unit: gpushare.Unit{MiB: 256}, Devices: []gpushare.Device{{Index: 0, UUID: "GPU-a", Model: "Tesla T4", Units: 58, MemoryMiB: 15079, Healthy: true}}},
			want: []wantDevice{{name: "gpu-0", uuid: "GPU-a", memory: "14848Mi", step: "256Mi", def: "256Mi"}},
		},
		{
			name:    "unhealthy card without a known XID is NoSchedule",
			inv:     gpushare.Inventory{Unit: gpushare.GiB, Devices: []gpushare.Device{t4(0, "GPU-a", false)}},
			lastXID: nil,
			want:    []wantDevice{{name: "gpu-0", uuid: "GPU-a", memory: "14Gi", step: "1Gi", def: "1Gi", taint: resourceapi.DeviceTaintEffectNoSchedule}},
		},
		{
			name:    "a card fallen off the bus is NoExecute",
			inv:     gpushare.Inventory{Unit: gpushare.GiB, Devices: []gpushare.Device{t4(0, "GPU-a", false), t4(1, "GPU-b", true)}},
			lastXID: map[string]uint64{"GPU-a": 79},
			want: []wantDevice{
				{name: "gpu-0", uuid: "GPU-a", memory: "14Gi", step: "1Gi", def: "1Gi", taint: resourceapi.DeviceTaintEffectNoExecute, taintValue: "79"},
				{name: "gpu-1", uuid: "GPU-b", memory: "14Gi", step: "1Gi", def: "1Gi"},
			},
		},
		{
			name:    "another critical XID is NoSchedule",
			inv:     gpushare.Inventory{Unit: gpushare.GiB, Devices: []gpushare.Device{t4(0, "GPU-a", false)}},
			lastXID: map[string]uint64{"GPU-a": 48},
			want:    []wantDevice{{name: "gpu-0", uuid: "GPU-a", memory: "14Gi", step: "1Gi", def: "1Gi", taint: resourceapi.DeviceTaintEffectNoSchedule, taintValue: "48"}},
		},
		{
			name:    "a recovered card loses its taint whatever its last XID",
			inv:     gpushare.Inventory{Unit: gpushare.GiB, Devices: []gpushare.Device{t4(0, "GPU-a", true)}},
			lastXID: map[string]uint64{"GPU-a": 79},
			want:    []wantDevice{{name: "gpu-0", uuid: "GPU-a", memory: "14Gi", step: "1Gi", def: "1Gi"}},
		},
		{name: "no cards publishes an empty slice", inv: gpushare.Inventory{Unit: gpushare.GiB}, want: []wantDevice{}},
		{name: "a card without UUID", inv: gpushare.Inventory{Unit: gpushare.GiB, Devices: []gpushare.Device{{Index: 0, Units: 14, Healthy: true}}}, wantErr: true},
		{name: "a card without units", inv: gpushare.Inventory{Unit: gpushare.GiB, Devices: []gpushare.Device{{Index: 0, UUID: "GPU-a", Healthy: true}}}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := DriverResources("node-a", tt.inv, tt.lastXID)
			if (err != nil) != tt.wantErr {
				t.Fatalf("DriverResources() error = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			pool, ok := res.Pools["node-a"]
			if !ok || len(res.Pools) != 1 || len(pool.Slices) != 1 {
				t.Fatalf("want one pool node-a with one slice, got %+v", res)
			}
			var got []wantDevice
			for _, d := range pool.Slices[0].Devices {
				c := d.Capacity[gpushare.DRACapacityMemory]
				p := c.RequestPolicy
				if d.AllowMultipleAllocations == nil || !*d.AllowMultipleAllocations {
					t.Errorf("%s: allowMultipleAllocations not true", d.Name)
				}
				if p.ValidRange.Min.Cmp(*p.ValidRange.Step) != 0 || p.ValidRange.Max.Cmp(c.Value) != 0 {
					t.Errorf("%s: valid range %v..%v, want one step up to the card's %v", d.Name, p.ValidRange.Min, p.ValidRange.Max, c.Value)
				}
				if got := *d.Attributes[gpushare.DRAAttributeProductName].StringValue; got != "Tesla T4" {
					t.Errorf("%s: productName %q, want Tesla T4", d.Name, got)
				}
				w := wantDevice{
					name: d.Name, uuid: *d.Attributes[gpushare.DRAAttributeUUID].StringValue,
					memory: c.Value.String(), step: p.ValidRange.Step.String(), def: p.Default.String(),
				}
				if n := len(d.Taints); n > 1 {
					t.Fatalf("%s: %d taints, want at most one", d.Name, n)
				} else if n == 1 {
					if d.Taints[0].Key != gpushare.DRATaintUnhealthy {
						t.Errorf("%s: taint key %q", d.Name, d.Taints[0].Key)
					}
					w.taint, w.taintValue = d.Taints[0].Effect, d.Taints[0].Value
				}
				got = append(got, w)
			}
			if len(got) == 0 {
				got = []wantDevice{}
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(wantDevice{})); diff != "" {
				t.Errorf("devices (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDriverResourcesBytes pins the capacity's unit: bytes, so that a claim's
// capacity.requests.memory: 4Gi is four GiB units.
func TestDriverResourcesBytes(t *testing.T) {
	inv := gpushare.Inventory{Unit: gpushare.GiB, Devices: []gpushare.Device{{Index: 3, UUID: "GPU-a", Units: 14, Healthy: true}}}
	res, err := DriverResources("n", inv, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := res.Pools["n"].Slices[0].Devices[0]
	if got, want := d.Capacity[gpushare.DRACapacityMemory].Value, resource.MustParse("14Gi"); got.Cmp(want) != 0 || got.Value() != 14<<30 {
		t.Errorf("memory capacity %v, want %v (%d bytes)", got.String(), want.String(), int64(14<<30))
	}
	if got := *d.Attributes[gpushare.DRAAttributeIndex].IntValue; got != 3 {
		t.Errorf("index attribute %d, want 3", got)
	}
}

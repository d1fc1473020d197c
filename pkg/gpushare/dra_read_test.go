package gpushare

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// cardDev is a card device as the DRA plugin publishes it: memory and step as quantities.
func cardDev(index int64, memory, step string, taints ...resourceapi.DeviceTaint) resourceapi.Device {
	return resourceapi.Device{
		Name: "gpu-x",
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			DRAAttributeIndex:       {IntValue: ptr.To(index)},
			DRAAttributeUUID:        {StringValue: ptr.To("GPU-a")},
			DRAAttributeProductName: {StringValue: ptr.To("Tesla T4")},
		},
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			DRACapacityMemory: {
				Value: resource.MustParse(memory),
				RequestPolicy: &resourceapi.CapacityRequestPolicy{
					Default:    ptr.To(resource.MustParse(step)),
					ValidRange: &resourceapi.CapacityRequestPolicyRange{Step: ptr.To(resource.MustParse(step))},
				},
			},
		},
		Taints: taints,
	}
}

func taint(effect resourceapi.DeviceTaintEffect) resourceapi.DeviceTaint {
	return resourceapi.DeviceTaint{Key: DRATaintUnhealthy, Effect: effect}
}

func TestReadDRACard(t *testing.T) {
	noIndex := cardDev(0, "14Gi", "1Gi")
	delete(noIndex.Attributes, DRAAttributeIndex)
	noPolicy := cardDev(0, "14Gi", "1Gi")
	noPolicy.Capacity[DRACapacityMemory] = resourceapi.DeviceCapacity{Value: resource.MustParse("14Gi")}
	noMemory := cardDev(0, "14Gi", "1Gi")
	delete(noMemory.Capacity, DRACapacityMemory)
	noNames := cardDev(3, "14Gi", "1Gi")
	delete(noNames.Attributes, DRAAttributeUUID)
	delete(noNames.Attributes, DRAAttributeProductName)
	tests := []struct {
		name    string
		dev     resourceapi.Device
		want    DRACard
		wantErr bool
	}{
		{name: "GiB card", dev: cardDev(1, "14Gi", "1Gi"),
			want: DRACard{Device: "gpu-x", Index: 1, UUID: "GPU-a", Model: "Tesla T4", Unit: GiB, MiB: 14336, Units: 14, DefaultUnits: 1, Healthy: true}},
		{name: "256MiB units", dev: cardDev(0, "15Gi", "256Mi"),
			want: DRACard{Device: "gpu-x", UUID: "GPU-a", Model: "Tesla T4", Unit: Unit{MiB: 256}, MiB: 15360, Units: 60, DefaultUnits: 1, Healthy: true}},
		{name: "NoSchedule taint is unhealthy", dev: cardDev(0, "1Gi", "1Gi", taint(resourceapi.DeviceTaintEffectNoSchedule)),
			want: DRACard{Device: "gpu-x", UUID: "GPU-a", Model: "Tesla T4", Unit: GiB, MiB: 1024, Units: 1, DefaultUnits: 1}},
		{name: "no UUID or model is still a card", dev: noNames,
			want: DRACard{Device: "gpu-x", Index: 3, Unit: GiB, MiB: 14336, Units: 14, DefaultUnits: 1, Healthy: true}},
		{name: "no index", dev: noIndex, wantErr: true},
		{name: "negative index", dev: cardDev(-1, "14Gi", "1Gi"), wantErr: true},
		{name: "huge index", dev: cardDev(1<<16, "14Gi", "1Gi"), wantErr: true},
		{name: "no memory", dev: noMemory, wantErr: true},
		{name: "no request policy", dev: noPolicy, wantErr: true},
		{name: "step not whole MiB", dev: cardDev(0, "14Gi", "1000"), wantErr: true},
		{name: "zero step", dev: cardDev(0, "14Gi", "0"), wantErr: true},
		{name: "memory not whole units", dev: cardDev(0, "15079Mi", "1Gi"), wantErr: true},
		{name: "zero memory", dev: cardDev(0, "0", "1Gi"), wantErr: true},
		{name: "negative memory", dev: cardDev(0, "-1Gi", "1Gi"), wantErr: true},
		{name: "fractional memory", dev: cardDev(0, "1.5", "1Gi"), wantErr: true},
		{name: "absurd memory", dev: cardDev(0, "2Ei", "1Gi"), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadDRACard(&tt.dev)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ReadDRACard() error = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("ReadDRACard() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestReadDRACardDefault(t *testing.T) {
	d := cardDev(0, "14Gi", "1Gi")
	c := d.Capacity[DRACapacityMemory]
	c.RequestPolicy.Default = ptr.To(resource.MustParse("2500Mi"))
	d.Capacity[DRACapacityMemory] = c
	got, err := ReadDRACard(&d)
	if err != nil || got.DefaultUnits != 3 {
		t.Fatalf("ReadDRACard() = %+v, %v; want DefaultUnits 3 (2500Mi rounded up to GiB)", got, err)
	}
}

func TestDRADeviceHealthy(t *testing.T) {
	tests := []struct {
		name   string
		taints []resourceapi.DeviceTaint
		want   bool
	}{
		{name: "no taint", want: true},
		{name: "None only informs", taints: []resourceapi.DeviceTaint{taint(resourceapi.DeviceTaintEffectNone)}, want: true},
		{name: "unknown effect is like None", taints: []resourceapi.DeviceTaint{taint("SomeFutureEffect")}, want: true},
		{name: "NoSchedule", taints: []resourceapi.DeviceTaint{taint(resourceapi.DeviceTaintEffectNoSchedule)}},
		{name: "NoExecute", taints: []resourceapi.DeviceTaint{taint(resourceapi.DeviceTaintEffectNoExecute)}},
		{name: "None beside NoExecute", taints: []resourceapi.DeviceTaint{taint(resourceapi.DeviceTaintEffectNone), taint(resourceapi.DeviceTaintEffectNoExecute)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DRADeviceHealthy(tt.taints); got != tt.want {
				t.Errorf("DRADeviceHealthy(%v) = %v, want %v", tt.taints, got, tt.want)
			}
		})
	}
}

func TestDRAConsumedUnits(t *testing.T) {
	result := func(consumed string) *resourceapi.DeviceRequestAllocationResult {
		r := &resourceapi.DeviceRequestAllocationResult{Driver: DRADriverName, Pool: "n", Device: "gpu-0"}
		if consumed != "" {
			r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{DRACapacityMemory: resource.MustParse(consumed)}
		}
		return r
	}
	tests := []struct {
		name     string
		consumed string
		unit     Unit
		want     int64
		wantErr  bool
	}{
		{name: "absent is the whole card", unit: GiB, want: 14},
		{name: "whole GiB", consumed: "4Gi", unit: GiB, want: 4},
		{name: "zero unit is GiB", consumed: "4Gi", want: 4},
		{name: "256MiB units", consumed: "1Gi", unit: Unit{MiB: 256}, want: 4},
		{name: "not whole units", consumed: "1536Mi", unit: GiB, wantErr: true},
		{name: "zero", consumed: "0", unit: GiB, wantErr: true},
		{name: "negative", consumed: "-1Gi", unit: GiB, wantErr: true},
		{name: "fractional bytes", consumed: "0.5", unit: GiB, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DRAConsumedUnits(result(tt.consumed), tt.unit, 14)
			if (err != nil) != tt.wantErr {
				t.Fatalf("DRAConsumedUnits() error = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("DRAConsumedUnits() = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestDRANewestPools(t *testing.T) {
	slice := func(name, pool, node string, gen int64) *resourceapi.ResourceSlice {
		s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.ResourceSliceSpec{
			Driver: DRADriverName, Pool: resourceapi.ResourcePool{Name: pool, Generation: gen}, NodeName: ptr.To(node)}}
		if node == "" {
			s.Spec.NodeName = nil
		}
		return s
	}
	other := slice("other-driver", "a", "a", 9)
	other.Spec.Driver = "gpu.example.com"
	all := []*resourceapi.ResourceSlice{
		slice("a1", "a", "a", 1), slice("a2", "a", "a", 2), slice("a2b", "a", "a", 2), slice("a0", "a", "a", 0),
		slice("a2-elsewhere", "a", "b", 2), other, nil,
		slice("b3", "b", "b", 3), slice("b2", "b", "b", 2),
		slice("no-node", "c", "", 5),
	}
	names := func(pools map[string][]*resourceapi.ResourceSlice) map[string][]string {
		out := map[string][]string{}
		for p, ss := range pools {
			for _, s := range ss {
				out[p] = append(out[p], s.Name)
			}
		}
		return out
	}
	tests := []struct {
		name string
		want func(string) bool
		out  map[string][]string
	}{
		{name: "every node", out: map[string][]string{"a": {"a2", "a2b"}, "b": {"b3"}}},
		{name: "node b only", want: func(n string) bool { return n == "b" }, out: map[string][]string{"a": {"a2-elsewhere"}, "b": {"b3"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := names(DRANewestPools(all, tt.want))
			if len(got) != len(tt.out) {
				t.Fatalf("DRANewestPools() = %v, want %v", got, tt.out)
			}
			for p, want := range tt.out {
				if len(got[p]) != len(want) {
					t.Fatalf("pool %s = %v, want %v", p, got[p], want)
				}
				for i := range want {
					if got[p][i] != want[i] {
						t.Errorf("pool %s = %v, want %v", p, got[p], want)
					}
				}
			}
		})
	}
}

func TestDRASliceUnit(t *testing.T) {
	mixed := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Devices: []resourceapi.Device{cardDev(0, "14Gi", "1Gi"), cardDev(1, "14Gi", "256Mi")}}}
	tests := []struct {
		name    string
		slice   *resourceapi.ResourceSlice
		want    Unit
		wantErr bool
	}{
		{name: "GiB", slice: &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Devices: []resourceapi.Device{cardDev(0, "14Gi", "1Gi"), cardDev(1, "15Gi", "1Gi")}}}, want: GiB},
		{name: "512MiB", slice: &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Devices: []resourceapi.Device{cardDev(0, "14Gi", "512Mi")}}}, want: Unit{MiB: 512}},
		{name: "devices disagree", slice: mixed, wantErr: true},
		{name: "no devices", slice: &resourceapi.ResourceSlice{}, wantErr: true},
		{name: "odd step", slice: &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Devices: []resourceapi.Device{cardDev(0, "14Gi", "1k")}}}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DRASliceUnit(tt.slice)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("DRASliceUnit() = %v, %v; want %v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

package gpushare

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Reading back what the DRA back end publishes (pkg/dra's DriverResources) and what the DRA
// allocator records in a claim. The scheduler plugin, inspect, the bench tools and the DRA
// plugin itself read the same records with these functions, so that they agree on a card's
// memory, its health and what a claim holds.
//
// Shapes and units: a card is one device of a ResourceSlice of driver DRADriverName, pool
// named after its node. Its DRACapacityMemory capacity counts bytes, a whole number of the
// node's unit; the unit is the capacity's requestPolicy.validRange.step (a whole number of
// MiB). Attributes DRAAttributeIndex (int), DRAAttributeUUID and DRAAttributeProductName
// (strings) name the card. A claim's allocation result consumes consumedCapacity[memory]
// bytes of the device, a whole number of units.

const (
	// draBytesPerMiB converts MiB to the bytes a capacity quantity counts.
	draBytesPerMiB = 1 << 20
	// draMaxIndex bounds the NVML index a card device may carry; a larger one is an odd record.
	draMaxIndex = 1 << 16
	// draMaxBytes bounds the quantities read: far above any card, far below overflow.
	draMaxBytes = int64(1) << 60
	// draMaxUnitMiB is ParseUnit's largest unit (2^20 GiB); a larger step is no unit of ours.
	draMaxUnitMiB = int64(1) << 30
)

// DRACard is one card device as read back from a ResourceSlice.
type DRACard struct {
	Device string // the device name, "gpu-<index>"
	Index  int    // the NVML index
	UUID   string // the NVML UUID; "" when the device does not carry it
	Model  string // the product name; "" when the device does not carry it
	Unit   Unit   // the memory capacity's request-policy step
	MiB    int64  // the memory capacity in MiB
	Units  int64  // the memory capacity in whole units of Unit
	// DefaultUnits are the units a request without a memory request consumes: the request
	// policy's default rounded up to whole units, one unit when it has none.
	DefaultUnits int64
	Healthy      bool // see DRADeviceHealthy
}

// ReadDRACard reads device d of a gpushare ResourceSlice. Errors (the device offers nothing):
// no NVML index in [0, 65536), no memory capacity, a request policy without a step that is a
// whole number of MiB (no unit we know), or memory that is not a positive whole number of
// units. UUID and product name only inform: a device without them is still a card.
func ReadDRACard(d *resourceapi.Device) (DRACard, error) {
	c := DRACard{Device: d.Name, Healthy: DRADeviceHealthy(d.Taints)}
	a, ok := d.Attributes[DRAAttributeIndex]
	if !ok || a.IntValue == nil || *a.IntValue < 0 || *a.IntValue >= draMaxIndex {
		return DRACard{}, fmt.Errorf("device %s: no %s attribute in [0, %d)", d.Name, DRAAttributeIndex, draMaxIndex)
	}
	c.Index = int(*a.IntValue)
	if a := d.Attributes[DRAAttributeUUID]; a.StringValue != nil {
		c.UUID = *a.StringValue
	}
	if a := d.Attributes[DRAAttributeProductName]; a.StringValue != nil {
		c.Model = *a.StringValue
	}
	capa, ok := d.Capacity[DRACapacityMemory]
	if !ok {
		return DRACard{}, fmt.Errorf("device %s: no %s capacity", d.Name, DRACapacityMemory)
	}
	unit, err := draPolicyUnit(capa.RequestPolicy)
	if err != nil {
		return DRACard{}, fmt.Errorf("device %s: %w", d.Name, err)
	}
	c.Unit = unit
	if c.Units, err = draWholeUnits(&capa.Value, unit); err != nil {
		return DRACard{}, fmt.Errorf("device %s: %s capacity: %w", d.Name, DRACapacityMemory, err)
	}
	c.MiB = c.Units * unit.MiB
	c.DefaultUnits = 1
	if p := capa.RequestPolicy; p.Default != nil {
		if b, err := draBytes(p.Default); err == nil && b > 0 {
			step := unit.MiB * draBytesPerMiB
			c.DefaultUnits = (b + step - 1) / step
		}
	}
	return c, nil
}

// DRASliceUnit is the unit of slice s: the request-policy step its devices share. Errors: a
// slice without devices, a device whose step is not a unit (see ReadDRACard), or devices
// that disagree.
func DRASliceUnit(s *resourceapi.ResourceSlice) (Unit, error) {
	var unit Unit
	for i := range s.Spec.Devices {
		d := &s.Spec.Devices[i]
		u, err := draPolicyUnit(d.Capacity[DRACapacityMemory].RequestPolicy)
		if err != nil {
			return Unit{}, fmt.Errorf("slice %s: device %s: %w", s.Name, d.Name, err)
		}
		if unit.MiB != 0 && u != unit {
			return Unit{}, fmt.Errorf("slice %s: device %s counts %s units, another %s", s.Name, d.Name, u, unit)
		}
		unit = u
	}
	if unit.MiB == 0 {
		return Unit{}, fmt.Errorf("slice %s has no devices", s.Name)
	}
	return unit, nil
}

// DRADeviceHealthy reports whether a device with these taints takes new claims: it does
// unless a taint has effect NoSchedule or NoExecute. The API (k8s.io/api/resource/v1
// DeviceTaint.Effect) defines None as "purely informational", NoSchedule as keeping new
// pods off the device, NoExecute as also evicting running ones, and says "Consumers must
// treat unknown effects like None". A claim's tolerations are not looked at: the card
// counts as taking nothing new.
func DRADeviceHealthy(taints []resourceapi.DeviceTaint) bool {
	for _, t := range taints {
		if t.Effect == resourceapi.DeviceTaintEffectNoSchedule || t.Effect == resourceapi.DeviceTaintEffectNoExecute {
			return false
		}
	}
	return true
}

// DRAConsumedUnits is the memory allocation result r consumes of its card, in units of unit:
// its consumedCapacity[memory], or cardUnits, the whole card, when the allocator recorded
// none (a scheduler without consumable capacity allocates the device whole, and the DRA
// plugin prepares it so). Errors: consumed memory that is not a positive whole number of
// units; callers fail closed.
func DRAConsumedUnits(r *resourceapi.DeviceRequestAllocationResult, unit Unit, cardUnits int64) (int64, error) {
	q, ok := r.ConsumedCapacity[DRACapacityMemory]
	if !ok {
		return cardUnits, nil
	}
	n, err := draWholeUnits(&q, unit)
	if err != nil {
		return 0, fmt.Errorf("consumed memory: %w", err)
	}
	return n, nil
}

// DRANewestPools are the gpushare driver's slices by pool name, of nodes that want accepts
// (nil: every node), each pool's newest generation only: slices of an older generation are
// being replaced and the DRA allocator ignores them too. A pool is one node's; a slice of
// the newest generation naming another node than the pool's first is ignored, as are
// slices of no single node. Slices keep their order in all.
func DRANewestPools(all []*resourceapi.ResourceSlice, want func(node string) bool) map[string][]*resourceapi.ResourceSlice {
	pools := map[string][]*resourceapi.ResourceSlice{}
	for _, s := range all {
		if s == nil || s.Spec.Driver != DRADriverName || s.Spec.NodeName == nil || *s.Spec.NodeName == "" {
			continue
		}
		if want != nil && !want(*s.Spec.NodeName) {
			continue
		}
		have := pools[s.Spec.Pool.Name]
		switch {
		case len(have) == 0 || s.Spec.Pool.Generation > have[0].Spec.Pool.Generation:
			pools[s.Spec.Pool.Name] = []*resourceapi.ResourceSlice{s}
		case s.Spec.Pool.Generation == have[0].Spec.Pool.Generation && *s.Spec.NodeName == *have[0].Spec.NodeName:
			pools[s.Spec.Pool.Name] = append(have, s)
		}
	}
	return pools
}

// draPolicyUnit is the unit a memory capacity's request policy steps by. Errors: no policy
// or step, or a step that is not a whole number of MiB up to draMaxUnitMiB.
func draPolicyUnit(p *resourceapi.CapacityRequestPolicy) (Unit, error) {
	if p == nil || p.ValidRange == nil || p.ValidRange.Step == nil {
		return Unit{}, fmt.Errorf("%s capacity has no request-policy step", DRACapacityMemory)
	}
	b, err := draBytes(p.ValidRange.Step)
	if err != nil || b <= 0 || b%draBytesPerMiB != 0 || b/draBytesPerMiB > draMaxUnitMiB {
		return Unit{}, fmt.Errorf("%s capacity's request-policy step %s is not a unit (a whole number of MiB)", DRACapacityMemory, p.ValidRange.Step)
	}
	return Unit{MiB: b / draBytesPerMiB}, nil
}

// draWholeUnits is q, in bytes, as whole units of unit (GiB when zero). Errors: not a positive whole number.
func draWholeUnits(q *resource.Quantity, unit Unit) (int64, error) {
	if unit.MiB <= 0 {
		unit = GiB // the zero Unit is the default, as everywhere
	}
	step := unit.MiB * draBytesPerMiB
	b, err := draBytes(q)
	if err != nil || b <= 0 || b%step != 0 {
		return 0, fmt.Errorf("%s is not a positive whole number of %s units", q, unit)
	}
	return b / step, nil
}

// draBytes is q as whole bytes. Errors: negative, fractional, or above draMaxBytes.
func draBytes(q *resource.Quantity) (int64, error) {
	if q.Sign() < 0 || q.CmpInt64(draMaxBytes) > 0 {
		return 0, fmt.Errorf("%s is out of range", q)
	}
	b, ok := q.AsInt64()
	if !ok {
		return 0, fmt.Errorf("%s is not a whole number of bytes", q)
	}
	return b, nil
}

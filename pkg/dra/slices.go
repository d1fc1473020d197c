package dra

import (
	"fmt"
	"strconv"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"

	"github.com/gpushare/gpushare/pkg/gpushare"
	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

// bytesPerMiB converts the inventory's MiB to the bytes a capacity quantity counts.
const bytesPerMiB = 1 << 20

// DeviceName is the ResourceSlice device name of the card with NVML index: "gpu-<index>".
func DeviceName(index int) string { return "gpu-" + strconv.Itoa(index) }

// unitBytes is the size of one unit of u in bytes.
func unitBytes(u gpushare.Unit) int64 {
	if u.MiB <= 0 {
		return gpushare.GiB.MiB * bytesPerMiB
	}
	return u.MiB * bytesPerMiB
}

// DriverResources builds what the node publishes: one pool, named after the node, with one
// slice holding one device per card of inv. A card's memory capacity counts in bytes but
// only whole units of inv.Unit (card.Units × unit, e.g. 14Gi for a T4 with GiB units, not
// its 15079Mi), so that what a claim can consume is what the device-plugin path hands out;
// its request policy makes one unit the default share and the step, from one unit up to the
// whole card, and allowMultipleAllocations lets many claims share the card. A card that is
// not healthy gets a NoSchedule taint, NoExecute when its latest fault (lastXID, by UUID) is
// XID 79, the card fallen off the bus: its pods cannot keep running. Errors: a card without
// a UUID (the DRA back end needs NVML's inventory) or without units.
func DriverResources(node string, inv gpushare.Inventory, lastXID map[string]uint64) (resourceslice.DriverResources, error) {
	unit := unitBytes(inv.Unit)
	devices := make([]resourceapi.Device, 0, len(inv.Devices))
	for _, card := range inv.Devices {
		if card.UUID == "" {
			return resourceslice.DriverResources{}, fmt.Errorf("card %d has no UUID", card.Index)
		}
		if card.Units <= 0 {
			return resourceslice.DriverResources{}, fmt.Errorf("card %d (%s) has no %s units", card.Index, card.UUID, inv.Unit)
		}
		devices = append(devices, cardDevice(card, unit, lastXID))
	}
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		node: {Slices: []resourceslice.Slice{{Devices: devices}}},
	}}, nil
}

// cardDevice is card's device; unit is the node's unit in bytes.
func cardDevice(card gpushare.Device, unit int64, lastXID map[string]uint64) resourceapi.Device {
	return resourceapi.Device{
		Name: DeviceName(card.Index),
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			gpushare.DRAAttributeUUID:        {StringValue: ptr.To(card.UUID)},
			gpushare.DRAAttributeIndex:       {IntValue: ptr.To(int64(card.Index))},
			gpushare.DRAAttributeProductName: {StringValue: ptr.To(card.Model)},
		},
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			gpushare.DRACapacityMemory: {
				Value: *resource.NewQuantity(card.Units*unit, resource.BinarySI),
				RequestPolicy: &resourceapi.CapacityRequestPolicy{
					Default: resource.NewQuantity(unit, resource.BinarySI),
					ValidRange: &resourceapi.CapacityRequestPolicyRange{
						Min:  resource.NewQuantity(unit, resource.BinarySI),
						Max:  resource.NewQuantity(card.Units*unit, resource.BinarySI),
						Step: resource.NewQuantity(unit, resource.BinarySI),
					},
				},
			},
		},
		AllowMultipleAllocations: ptr.To(true),
		Taints:                   cardTaints(card, lastXID[card.UUID]),
	}
}

// cardTaints are the taints of card whose latest critical XID is xid (0: none known).
func cardTaints(card gpushare.Device, xid uint64) []resourceapi.DeviceTaint {
	if card.Healthy {
		return nil
	}
	effect := resourceapi.DeviceTaintEffectNoSchedule
	if xid == gpunvml.XIDFallenOffBus {
		effect = resourceapi.DeviceTaintEffectNoExecute
	}
	value := ""
	if xid != 0 {
		value = strconv.FormatUint(xid, 10)
	}
	return []resourceapi.DeviceTaint{{Key: gpushare.DRATaintUnhealthy, Value: value, Effect: effect}}
}

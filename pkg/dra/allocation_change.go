package dra

import (
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// checkSameAllocation refuses to answer a repeated prepare from the checkpoint when the
// claim's allocation is no longer the one prepared: its results of this driver (request,
// pool, device, share ID and consumed units, in the claim's order) differ from p.Devices.
// That happens when a claim is deallocated and allocated again under the same UID while
// this node still holds it prepared (an unprepare kubelet never sent): the old answer
// would hand the old card and memory to a claim the scheduler placed elsewhere. Errors:
// reasonAllocationChanged, naming both allocations.
func (d *Driver) checkSameAllocation(claim *resourceapi.ResourceClaim, p PreparedClaim) error {
	now := d.allocatedDevices(claim)
	if slices.EqualFunc(now, p.Devices, sameDevice) {
		return nil
	}
	return failed(reasonAllocationChanged, fmt.Errorf("its allocation changed since it was prepared on this node (prepared: %s; allocated now: %s): it must be unprepared before it is prepared again",
		describeDevices(p.Devices), describeDevices(now)))
}

// allocatedDevices are the claim's results of this driver as PreparedDevices, for
// comparison only: a result naming no card of this node, or consuming memory that is not
// whole units, gets Units -1, which no prepared device has.
func (d *Driver) allocatedDevices(claim *resourceapi.ResourceClaim) []PreparedDevice {
	if claim.Status.Allocation == nil {
		return nil
	}
	var out []PreparedDevice
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != gpushare.DRADriverName {
			continue
		}
		dev := PreparedDevice{Request: r.Request, Pool: r.Pool, Device: r.Device, ShareID: r.ShareID, Units: -1}
		if card, ok := d.cards[r.Device]; ok && r.Pool == d.cfg.NodeName {
			if units, err := d.consumedUnits(r, card); err == nil {
				dev.Units = units
			}
		}
		out = append(out, dev)
	}
	return out
}

// sameDevice compares what the allocation decides of a result; the card's index and UUID
// follow from its device name.
func sameDevice(a, b PreparedDevice) bool {
	return a.Request == b.Request && a.Pool == b.Pool && a.Device == b.Device && a.Units == b.Units &&
		(a.ShareID == nil) == (b.ShareID == nil) && (a.ShareID == nil || *a.ShareID == *b.ShareID)
}

// describeDevices writes devices as "<request> on <pool>/<device> share <ID>, <units> units",
// joined by commas; "none" for none.
func describeDevices(devices []PreparedDevice) string {
	if len(devices) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(devices))
	for _, dev := range devices {
		share := "none"
		if dev.ShareID != nil {
			share = string(*dev.ShareID)
		}
		units := fmt.Sprintf("%d units", dev.Units)
		if dev.Units < 0 {
			units = "units unknown"
		}
		parts = append(parts, fmt.Sprintf("%s on %s/%s share %s, %s", dev.Request, dev.Pool, dev.Device, share, units))
	}
	return strings.Join(parts, ", ")
}

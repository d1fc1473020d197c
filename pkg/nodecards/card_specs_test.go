package nodecards

import (
	"testing"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// TestCardEditsNeedsMinor: a real card whose minor number NVML did not tell cannot be
// named as a device node; the allocation fails instead of handing over a wrong node.
func TestCardEditsNeedsMinor(t *testing.T) {
	cards := []gpushare.Device{{Index: 0, UUID: "GPU-a"}}
	for _, minors := range []map[string]int{{}, {"GPU-a": -1}} {
		if _, err := cardEdits(cards, minors, "", nil); err == nil {
			t.Errorf("minors %v: accepted", minors)
		}
	}
	e, err := cardEdits(cards, map[string]int{"GPU-a": 3}, "", []string{"/dev/nvidiactl"})
	if err != nil || len(e.DeviceNodes) != 2 || e.DeviceNodes[0].Path != "/dev/nvidia3" || e.DeviceNodes[1].Path != "/dev/nvidiactl" {
		t.Errorf("cardEdits = %+v, %v; want /dev/nvidia3 and /dev/nvidiactl", e, err)
	}
}

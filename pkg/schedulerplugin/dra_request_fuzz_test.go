package schedulerplugin

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// FuzzDRARequestShare: a tenant's claim request (count, allocation mode, memory quantity,
// exact or first of a prioritized list) never makes reading it panic, and on a node of 1 GiB
// units it becomes a request the ledger can count: 1..maxDRACards cards (every card of the
// node for mode All), whole units on each card, no sum past gpushare.MaxContainerUnits; a
// request past that is refused, never read as nothing.
func FuzzDRARequestShare(f *testing.F) {
	for _, s := range []struct {
		count       int64
		mode, mem   string
		prioritized bool
	}{
		{1, "ExactCount", "4Gi", false},
		{2, "ExactCount", "1", true},
		{0, "All", "", false},
		{-5, "Odd", "-1Gi", false},
		{1 << 40, "ExactCount", "1E", true},
		{1, "ExactCount", "0.5", false},
		{1, "ExactCount", "1e30", false},
	} {
		f.Add(s.count, s.mode, s.mem, s.prioritized)
	}
	node := &draNode{unit: 1 << 30, defUnits: 16, cards: make([]policy.Card, 8)}
	f.Fuzz(func(t *testing.T, count int64, mode, mem string, prioritized bool) {
		var capa *resourceapi.CapacityRequirements
		if q, err := resource.ParseQuantity(mem); err == nil {
			capa = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{gpushare.DRACapacityMemory: q}}
		}
		r := resourceapi.DeviceRequest{Name: "gpu"}
		if prioritized {
			r.FirstAvailable = []resourceapi.DeviceSubRequest{{Name: "a", DeviceClassName: gpushare.DRADriverName,
				AllocationMode: resourceapi.DeviceAllocationMode(mode), Count: count, Capacity: capa}}
		} else {
			r.Exactly = &resourceapi.ExactDeviceRequest{DeviceClassName: gpushare.DRADriverName,
				AllocationMode: resourceapi.DeviceAllocationMode(mode), Count: count, Capacity: capa}
		}
		sh, ok := requestShare(r)
		if !ok {
			t.Fatalf("a request of the gpushare class was not read")
		}
		if sh.cards < 0 || sh.cards > maxDRACards || sh.bytes < -1 || sh.bytes > maxDRABytes {
			t.Fatalf("share %+v", sh)
		}
		units, cards := node.defUnits, int64(sh.cards)
		if sh.bytes >= 0 {
			units = max(ceilDiv(sh.bytes, node.unit), 1)
		}
		if cards == 0 {
			cards = int64(len(node.cards))
		}
		req, err := draRequest{sh}.podRequest(node)
		if fits := units <= gpushare.MaxContainerUnits/cards; (err == nil) != fits {
			t.Fatalf("share %+v (%d units on each of %d cards): err = %v", sh, units, cards, err)
		}
		if err != nil {
			return
		}
		c := req.Containers[0]
		if c.Cards < 1 || c.Units < int64(c.Cards) || c.Units%int64(c.Cards) != 0 || c.Units > gpushare.MaxContainerUnits {
			t.Fatalf("share %+v read as %d units on %d cards", sh, c.Units, c.Cards)
		}
		if sh.bytes > 0 && c.Units/int64(c.Cards)*node.unit < sh.bytes {
			t.Fatalf("share %+v read as %d units a card, less than it asks", sh, c.Units/int64(c.Cards))
		}
	})
}

package deviceplugin

import (
	"fmt"
	"sort"

	"github.com/gpushare/gpushare/pkg/gpushare"
	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

// buildCards converts NVML devices to cards in index order, each card its own size in
// units (floor(MemoryMiB / unit MiB)) and healthy: from then on health tracks the cards,
// and the inventory and ListAndWatch read it there. Errors: no devices, a card too small
// for one unit, duplicate indexes or UUIDs.
func buildCards(devs []gpunvml.Device, unit gpushare.Unit) ([]gpushare.Device, error) {
	if len(devs) == 0 {
		return nil, fmt.Errorf("NVML reports no GPU on this node")
	}
	cards := make([]gpushare.Device, 0, len(devs))
	idx, uuids := map[int]bool{}, map[string]bool{}
	for _, d := range devs {
		switch {
		case idx[d.Index]:
			return nil, fmt.Errorf("NVML reports card index %d twice", d.Index)
		case d.UUID == "" || uuids[d.UUID]:
			return nil, fmt.Errorf("card %d: UUID %q is empty or not unique", d.Index, d.UUID)
		}
		idx[d.Index], uuids[d.UUID] = true, true
		units := unit.UnitsOf(d.MemoryMiB)
		if units < 1 {
			return nil, fmt.Errorf("card %d (%s, %d MiB) is smaller than one %s unit", d.Index, d.Model, d.MemoryMiB, unit)
		}
		cards = append(cards, gpushare.Device{Index: d.Index, UUID: d.UUID, Model: d.Model, MemoryMiB: d.MemoryMiB, Units: units, Healthy: true})
	}
	sort.Slice(cards, func(i, j int) bool { return cards[i].Index < cards[j].Index })
	return cards, nil
}

// cardSet indexes cards by NVML index and UUID.
type cardSet struct {
	list    []gpushare.Device
	byIndex map[int]gpushare.Device
	byUUID  map[string]gpushare.Device
}

func newCardSet(cards []gpushare.Device) cardSet {
	s := cardSet{list: cards, byIndex: map[int]gpushare.Device{}, byUUID: map[string]gpushare.Device{}}
	for _, c := range cards {
		s.byIndex[c.Index] = c
		s.byUUID[c.UUID] = c
	}
	return s
}

// has reports whether this node has the card of NVML index i.
func (s cardSet) has(i int) bool {
	_, ok := s.byIndex[i]
	return ok
}

// inventory is the node annotation value for the cards with the given health.
func inventory(cards []gpushare.Device, unit gpushare.Unit, healthy func(uuid string) bool) gpushare.Inventory {
	inv := gpushare.Inventory{Unit: unit, Devices: make([]gpushare.Device, 0, len(cards))}
	for _, c := range cards {
		c.Healthy = healthy(c.UUID)
		inv.Devices = append(inv.Devices, c)
	}
	return inv
}

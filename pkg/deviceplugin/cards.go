package deviceplugin

import (
	"fmt"
	"sort"

	"github.com/gpushare/gpushare/pkg/gpushare"
	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

// Card is one GPU as the plugin advertises it.
type Card struct {
	Index     int    // NVML index, the card index of the pod annotations
	UUID      string // NVML UUID, what NVIDIA_VISIBLE_DEVICES names
	Model     string
	MemoryMiB int64 // total memory in MiB
	Units     int64 // gpu-mem units: floor(MemoryMiB / unit MiB)
}

// buildCards converts NVML devices to cards in index order, each card its own size. Errors:
// no devices, a card too small for one unit, duplicate indexes or UUIDs.
func buildCards(devs []gpunvml.Device, unit gpushare.Unit) ([]Card, error) {
	if len(devs) == 0 {
		return nil, fmt.Errorf("NVML reports no GPU on this node")
	}
	cards := make([]Card, 0, len(devs))
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
		cards = append(cards, Card{Index: d.Index, UUID: d.UUID, Model: d.Model, MemoryMiB: d.MemoryMiB, Units: units})
	}
	sort.Slice(cards, func(i, j int) bool { return cards[i].Index < cards[j].Index })
	return cards, nil
}

// cardSet indexes cards by NVML index and UUID.
type cardSet struct {
	list    []Card
	byIndex map[int]Card
	byUUID  map[string]Card
}

func newCardSet(cards []Card) cardSet {
	s := cardSet{list: cards, byIndex: map[int]Card{}, byUUID: map[string]Card{}}
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
func inventory(cards []Card, unit gpushare.Unit, healthy func(uuid string) bool) gpushare.Inventory {
	inv := gpushare.Inventory{Unit: unit, Devices: make([]gpushare.Device, 0, len(cards))}
	for _, c := range cards {
		inv.Devices = append(inv.Devices, gpushare.Device{
			Index: c.Index, UUID: c.UUID, Model: c.Model, Units: c.Units, MemoryMiB: c.MemoryMiB,
			Healthy: healthy(c.UUID),
		})
	}
	return inv
}

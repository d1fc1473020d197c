package nodecards

import (
	"fmt"
	"sort"

	"github.com/gpushare/gpushare/pkg/gpushare"
	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

// BuildCards converts NVML devices to cards in index order, each card its own size in
// units (floor(MemoryMiB / unit MiB)) and healthy: from then on Health tracks the cards,
// and each back end reads their health there. Errors: no devices, a card too small for one
// unit, duplicate indexes or UUIDs.
func BuildCards(devs []gpunvml.Device, unit gpushare.Unit) ([]gpushare.Device, error) {
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

// Set is the node's cards indexed by NVML index. The zero Set has no card.
type Set struct {
	list    []gpushare.Device
	byIndex map[int]gpushare.Device
}

// NewSet indexes cards (BuildCards' result: index order, unique indexes).
func NewSet(cards []gpushare.Device) Set {
	s := Set{list: cards, byIndex: map[int]gpushare.Device{}}
	for _, c := range cards {
		s.byIndex[c.Index] = c
	}
	return s
}

// List is the cards in index order; callers must not change it.
func (s Set) List() []gpushare.Device { return s.list }

// Has reports whether this node has the card of NVML index i.
func (s Set) Has(i int) bool {
	_, ok := s.byIndex[i]
	return ok
}

// ByIndex is the card of NVML index i, and whether this node has it.
func (s Set) ByIndex(i int) (gpushare.Device, bool) {
	c, ok := s.byIndex[i]
	return c, ok
}

// Inventory is cards in unit, each with its health now as healthy says; cards itself is
// left as it was.
func Inventory(cards []gpushare.Device, unit gpushare.Unit, healthy func(uuid string) bool) gpushare.Inventory {
	inv := gpushare.Inventory{Unit: unit, Devices: make([]gpushare.Device, 0, len(cards))}
	for _, c := range cards {
		c.Healthy = healthy(c.UUID)
		inv.Devices = append(inv.Devices, c)
	}
	return inv
}

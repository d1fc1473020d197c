package nodecards

import (
	"testing"

	"github.com/gpushare/gpushare/pkg/gpushare"
	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

func TestBuildCards(t *testing.T) {
	_, err := BuildCards([]gpunvml.Device{{Index: 0, UUID: "GPU-a", MemoryMiB: 500}}, gpushare.GiB)
	if err == nil {
		t.Error("a 500 MiB card in GiB units: want an error")
	}
	_, err = BuildCards([]gpunvml.Device{{Index: 0, UUID: "GPU-a", MemoryMiB: 2048}, {Index: 1, UUID: "GPU-a", MemoryMiB: 2048}}, gpushare.GiB)
	if err == nil {
		t.Error("duplicate UUIDs: want an error")
	}
	if _, err := BuildCards(nil, gpushare.GiB); err == nil {
		t.Error("no cards: want an error")
	}
}

func TestInventory(t *testing.T) {
	cards := []gpushare.Device{
		{Index: 0, UUID: "GPU-aaaa", Model: "Tesla T4", Units: 14, MemoryMiB: 15079, Healthy: true},
		{Index: 1, UUID: "GPU-bbbb", Model: "Tesla T4", Units: 14, MemoryMiB: 15079, Healthy: true},
	}
	inv := Inventory(cards, gpushare.GiB, func(uuid string) bool { return uuid != "GPU-bbbb" })
	if inv.Unit != gpushare.GiB || len(inv.Devices) != 2 {
		t.Fatalf("inventory %+v", inv)
	}
	if !inv.Devices[0].Healthy || inv.Devices[1].Healthy {
		t.Errorf("health %v, %v; want true, false", inv.Devices[0].Healthy, inv.Devices[1].Healthy)
	}
	if !cards[1].Healthy {
		t.Errorf("Inventory changed its input")
	}
}

func TestSet(t *testing.T) {
	s := NewSet([]gpushare.Device{{Index: 0, UUID: "GPU-a"}, {Index: 2, UUID: "GPU-c"}})
	if !s.Has(2) || s.Has(1) {
		t.Errorf("Has(2), Has(1) = %v, %v; want true, false", s.Has(2), s.Has(1))
	}
	if c, ok := s.ByIndex(2); !ok || c.UUID != "GPU-c" {
		t.Errorf("ByIndex(2) = %+v, %v; want GPU-c", c, ok)
	}
	if len(s.List()) != 2 || len(Set{}.List()) != 0 || (Set{}).Has(0) {
		t.Errorf("List() = %v; the zero Set must hold no card", s.List())
	}
}

package dra

import (
	"testing"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

func TestCurrentInventory(t *testing.T) {
	cards := testInventory().Devices
	inv := currentInventory(gpushare.GiB, cards, func(uuid string) bool { return uuid != "GPU-bbbb" })
	if inv.Unit != gpushare.GiB || len(inv.Devices) != 2 {
		t.Fatalf("inventory %+v", inv)
	}
	if !inv.Devices[0].Healthy || inv.Devices[1].Healthy {
		t.Errorf("health %v, %v; want true, false", inv.Devices[0].Healthy, inv.Devices[1].Healthy)
	}
	if !cards[1].Healthy {
		t.Errorf("currentInventory changed its input")
	}
}

package cache

import (
	"strconv"
	"testing"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// TestCapacityBookUnits: the capacity is given in the unit holding most memory, the others
// converted, exactly when one unit holds all of it; nodes leaving take their share along.
func TestCapacityBookUnits(t *testing.T) {
	gib, mib := gpushare.GiB, gpushare.Unit{MiB: 1}
	tests := []struct {
		name   string
		shares []capacityShare
		want   int64
	}{
		{"empty", nil, 0},
		{"GiB alone", []capacityShare{shareOf(gib, 32), shareOf(gpushare.Unit{}, 16)}, 48},
		{"GiB holds most: MiB converted", []capacityShare{shareOf(gib, 32), shareOf(mib, 15079)}, 32 + 15079/1024},
		{"MiB holds most: GiB converted", []capacityShare{shareOf(gib, 8), shareOf(mib, 3*16384)}, 8*1024 + 3*16384},
		{"a tie goes to the smaller unit", []capacityShare{shareOf(gib, 16), shareOf(mib, 16384)}, 32768},
		{"15 MiB units next to GiB", []capacityShare{shareOf(gpushare.Unit{MiB: 15}, 1000), shareOf(gib, 80)}, (15000 + 80*1024) / 1024},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b capacityBook
			for i, s := range tc.shares {
				b.set("n"+strconv.Itoa(i), shareOf(gib, 1)) // replaced next
				b.set("n"+strconv.Itoa(i), s)
			}
			if got := b.units(); got != tc.want {
				t.Errorf("units() = %d, want %d", got, tc.want)
			}
			for i := range tc.shares {
				b.set("n"+strconv.Itoa(i), capacityShare{})
			}
			if got := b.units(); got != 0 || len(b.byUnit) != 0 || len(b.byNode) != 0 {
				t.Errorf("after every node left: units() = %d, book %v %v", got, b.byUnit, b.byNode)
			}
		})
	}
}

package gpushare

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// TestParseInventoryBounds: a published value outside what a real card has is a *RangeError
// naming it; values at the bounds are accepted.
func TestParseInventoryBounds(t *testing.T) {
	card := func(fields string) string { return `{"index":0,` + fields + `,"healthy":true}` }
	inv := func(unit string, cards ...string) string {
		return `{"unit":"` + unit + `","devices":[` + strings.Join(cards, ",") + `]}`
	}
	many := make([]string, MaxCards+1)
	for i := range many {
		many[i] = `{"index":` + strconv.Itoa(i) + `,"units":1}`
	}
	tests := []struct {
		name    string
		in      string
		wantErr string // "": valid; else the *RangeError's text contains it
	}{
		{"a T4 in GiB", inv("GiB", card(`"units":14,"memoryMiB":15079`)), ""},
		{"a T4 in MiB", inv("MiB", card(`"units":15079,"memoryMiB":15079`)), ""},
		{"the largest card, in MiB", inv("MiB", card(`"units":4194304`)), ""},
		{"the largest card, in GiB", inv("GiB", card(`"units":4096`)), ""},
		{"a unit as large as a card", inv("4096GiB", card(`"units":1`)), ""},
		{"units 9e18", inv("GiB", card(`"units":9000000000000000000`)), "card 0 units 9000000000000000000 out of range 0..4294967296"},
		{"units just over 2^32", inv("GiB", card(`"units":4294967297`)), "card 0 units 4294967297 out of range"},
		{"negative units", inv("GiB", card(`"units":-1`)), "card 0 units -1 out of range"},
		{"a card over 4 TiB", inv("GiB", card(`"units":4097`)), "card 0 memory (MiB, units × GiB) 4195328 out of range 0..4194304"},
		{"2^32 units of a large unit", inv("1024GiB", card(`"units":4294967296`)), "card 0 memory (MiB, units × 1024GiB)"},
		{"a unit larger than any card", inv("8192GiB", card(`"units":0`)), "unit size (MiB) 8388608 out of range"},
		{"memoryMiB over 4 TiB", inv("GiB", card(`"units":1,"memoryMiB":4194305`)), "card 0 memoryMiB 4194305 out of range"},
		{"negative memoryMiB", inv("GiB", card(`"units":1,"memoryMiB":-5`)), "card 0 memoryMiB -5 out of range"},
		{"MiB counts labelled GiB", inv("GiB", card(`"units":15079,"memoryMiB":15079`)), "card 0 memory (MiB, units × GiB) 15440896 out of range"},
		{"more units than memoryMiB holds", inv("GiB", card(`"units":15,"memoryMiB":15079`)), "card 0 memory (MiB, units × GiB) over its memoryMiB 15360 out of range 0..15079"},
		{"too many cards", inv("GiB", many...), "card count 1025 out of range 0..1024"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseInventory(tc.in)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			var re *RangeError
			if !errors.As(err, &re) {
				t.Fatalf("error = %v, want a *RangeError", err)
			}
			if !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), AnnotationNodeInventory) {
				t.Errorf("error = %q, want containing %q and the annotation's name", err, tc.wantErr)
			}
		})
	}
}

package cache

import (
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
)

func TestUnion(t *testing.T) {
	u := func(pairs ...int64) cardUsage {
		var out cardUsage
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, cardUse{card: int(pairs[i]), units: pairs[i+1]})
		}
		return out
	}
	tests := []struct {
		name string
		a, b cardUsage
		want cardUsage
	}{
		{"moved: card 0 16 ∪ card 1 16", u(0, 16), u(1, 16), u(0, 16, 1, 16)},
		{"same card: max(8, 16)", u(0, 8), u(0, 16), u(0, 16)},
		{"subset keeps the larger", u(0, 16, 3, 4), u(3, 2), u(0, 16, 3, 4)},
		{"interleaved", u(1, 1, 4, 4), u(0, 2, 2, 2, 4, 1), u(0, 2, 1, 1, 2, 2, 4, 4)},
		{"empty", nil, u(2, 5), u(2, 5)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, union(tc.a, tc.b), cmp.AllowUnexported(cardUse{})); d != "" {
				t.Errorf("union (-want,+got):\n%s", d)
			}
		})
	}
}

// One entry per placed pod: keep it in the 24-byte size class.
func TestPodEntryStaysSmall(t *testing.T) {
	if got := unsafe.Sizeof(podEntry{}); got > 24 {
		t.Errorf("podEntry is %d bytes, want at most 24", got)
	}
}

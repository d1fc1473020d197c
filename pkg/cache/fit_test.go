package cache

import (
	"testing"
	"unsafe"
)

// TestNodeStateLayout holds nodeState to the 256-byte size class, whose objects start on a
// cache line: the filter shortcut (fits) then reads mu, topFree, nTop, plain and known, and
// the rating paths the name, from one line per node, and the cards slice from the next:
// memory latency is the cost that dominates a filter or a rating of thousands of nodes.
func TestNodeStateLayout(t *testing.T) {
	var n nodeState
	if size := unsafe.Sizeof(n); size != 256 {
		t.Errorf("nodeState is %d bytes, want 256 (see the comment on topFree)", size)
	}
	if end := unsafe.Offsetof(n.name) + unsafe.Sizeof(n.name); end > 64 {
		t.Errorf("the filter shortcut's fields and the name end at byte %d, past the first cache line", end)
	}
	if off := unsafe.Offsetof(n.cards); off != 64 {
		t.Errorf("cards starts at byte %d, want 64 (the second line)", off)
	}
}

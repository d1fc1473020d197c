package bound

import (
	"math/rand"
	"testing"
)

// allSizes is 1..c.
func allSizes(c int64) []int64 {
	out := make([]int64, c)
	for i := range out {
		out[i] = int64(i + 1)
	}
	return out
}

// TestDFFsExhaustive checks dual feasibility on every multiset of integer sizes that fits a
// bin of capacity c: the values sum to at most 1.
func TestDFFsExhaustive(t *testing.T) {
	for _, c := range []int64{1, 2, 7, 24, 31} {
		funcs := dffs(c, allSizes(c), 6)
		var items []int64
		// Partitions of every total ≤ c into parts ≤ largest, in non-increasing order.
		var walk func(room, largest int64)
		walk = func(room, largest int64) {
			for _, u := range funcs {
				sum := 0.0
				for _, v := range items {
					sum += u.of(v)
				}
				if sum > 1+1e-12 {
					t.Fatalf("c=%d %s: items %v sum to %v > 1", c, u.name, items, sum)
				}
			}
			for v := min(room, largest); v >= 1; v-- {
				items = append(items, v)
				walk(room-v, v)
				items = items[:len(items)-1]
			}
		}
		walk(c, c)
	}
}

// TestDFFsRandom checks dual feasibility on random full bins of the trace's card
// (1000 GPU-milli) and of a node's cpu.
func TestDFFsRandom(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, c := range []int64{1000, 96000} {
		var sizes []int64
		for i := 0; i < 60; i++ {
			sizes = append(sizes, 1+rng.Int63n(c))
		}
		funcs := dffs(c, sizes, 6)
		for trial := 0; trial < 20000; trial++ {
			var items []int64
			room := c
			for room > 0 {
				v := sizes[rng.Intn(len(sizes))]
				if trial%2 == 0 { // cut the last item to fill the bin exactly
					v = min(v, room)
				}
				if v > room {
					break
				}
				items = append(items, v)
				room -= v
			}
			for _, u := range funcs {
				sum := 0.0
				for _, v := range items {
					sum += u.of(v)
				}
				if sum > 1+1e-9 {
					t.Fatalf("c=%d %s: items %v sum to %v > 1", c, u.name, items, sum)
				}
			}
		}
	}
}

func TestDFFValues(t *testing.T) {
	tests := []struct {
		u    dff
		v    int64
		want float64
	}{
		{uEps(1000, 401), 600, 1},     // above 1 − ε: a whole bin
		{uEps(1000, 401), 599, 0.599}, // between: its size
		{uEps(1000, 401), 400, 0},     // below ε: nothing
		{uK(1000, 1), 500, 0.5},       // 2x integer: x
		{uK(1000, 1), 501, 1},         // ⌊2x⌋/1
		{uK(1000, 2), 340, 1.0 / 2},   // ⌊3x⌋/2
		{uK(1000, 2), 200, 0},
	}
	for _, tt := range tests {
		if got := tt.u.of(tt.v); got != tt.want {
			t.Errorf("%s(%d) = %v, want %v", tt.u.name, tt.v, got, tt.want)
		}
	}
}

package policy

import (
	"math/rand"
	"testing"
)

// BenchmarkFGDScore is fgd's scoring of one pod on 1000 distinct nodes (no two alike, so the
// Scorer's memo never helps) against 151 shapes: the cost of a node the memo has not seen.
func BenchmarkFGDScore(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	shapes, _ := goldenShapes(r, 151)
	w := make(Workload, len(shapes))
	for i, s := range shapes {
		s.Weight = 1 / float64(len(shapes))
		w[i] = s
	}
	nodes := make([]Node, 1000)
	for i := range nodes {
		n := Node{Host: &Host{CPUMilli: 96000 - int64(i)*50, MemoryMiB: 393216 - int64(i)*100}}
		for c := range 8 {
			n.Cards = append(n.Cards, Card{Index: c, Total: 1000, Used: []int64{0, 0, 0, 190, 500, 1000}[r.Intn(6)], Healthy: true})
		}
		nodes[i] = n
	}
	pol := newFGD(w, Capacity{})
	for _, tc := range []struct {
		name string
		s    Shape
	}{{"1card", shapes[0]}, {"cpu-only", Shape{Host: Host{CPUMilli: 12000, MemoryMiB: 50000}}}} {
		b.Run(tc.name, func(b *testing.B) {
			sc := NewScorer(pol, shapeRequest(tc.s), tc.s.Host)
			b.ReportAllocs()
			for b.Loop() {
				for _, n := range nodes {
					sc.score(n)
				}
			}
		})
	}
}

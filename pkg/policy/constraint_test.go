package policy

import (
	"math"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
)

func TestConstraintSet(t *testing.T) {
	var empty ConstraintSet
	s := empty.With(3).With(64).With(0)
	for _, tc := range []struct {
		name string
		set  ConstraintSet
		c    Constraint
		want bool
	}{
		{"empty", empty, 3, false},
		{"member", s, 3, true},
		{"member in the second word", s, 64, true},
		{"not a member", s, 4, false},
		{"beyond the set", s, 200, false},
		{"0 is never a member", ConstraintSet{1}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.set.Has(tc.c); got != tc.want {
				t.Errorf("Has(%d) = %v, want %v", tc.c, got, tc.want)
			}
		})
	}
	if base := (ConstraintSet{1 << 3}); len(base.With(5)) != 1 || base[0] != 1<<3 {
		t.Errorf("With modified its receiver or grew it needlessly: %v", base)
	}
}

func TestShapeCounterKeepsConstraintsApart(t *testing.T) {
	var sc ShapeCounter
	h := Host{CPUMilli: 4000}
	for range 3 {
		sc.Add(req(app(0, 500, 1)), h, 0)
	}
	sc.Add(req(app(0, 500, 1)), h, 2)
	// One card shape, two constraints: two shapes, 3/4 and 1/4.
	want := Workload{
		{Cards: 1, PerCard: 500, Host: h, Weight: 0.75},
		{Cards: 1, PerCard: 500, Host: h, Constraint: 2, Weight: 0.25},
	}
	if diff := cmp.Diff(want, sc.Workload(1, 10)); diff != "" {
		t.Errorf("Workload (-want,+got):\n%s", diff)
	}
}

func TestFGDUnmetConstraint(t *testing.T) {
	// Two shapes of one card of 600 units: a (anywhere, weight 0.5) and b (constraint 1,
	// weight 0.5). Free: 1000 and 700. A 300-unit pod taken from the 1000 card leaves 700 and
	// 700, both usable by both shapes: F does not change (ΔF = 0). On a node that fails
	// constraint 1, b can use nothing: F before = 0.5 × 1700 and after 0.5 × 1400, so
	// ΔF = -150: the pod lowers F there by b's share of what it takes.
	w := Workload{{Cards: 1, PerCard: 600, Weight: 0.5}, {Cards: 1, PerCard: 600, Constraint: 1, Weight: 0.5}}
	f := newFGD(w, Capacity{})
	cs := []Card{{Index: 0, Total: 1000, Healthy: true}, {Index: 1, Total: 1000, Used: 300, Healthy: true}}
	rq := req(app(0, 300, 1))
	for _, tc := range []struct {
		name   string
		unmet  ConstraintSet
		wantDF float64
	}{
		{"meets every constraint", nil, 0},
		{"fails another constraint", ConstraintSet{}.With(2), 0},
		{"fails the shape's constraint", ConstraintSet{}.With(1), -150},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := Node{Cards: cs, Unmet: tc.unmet}
			p, err := f.Place(node, rq)
			if err != nil {
				t.Fatal(err)
			}
			// Score is -ΔF plus the binpack tie-breaker, the same on every case.
			tie := tieWeight * binpack{}.Score(node, p)
			if got := -(f.Score(node, p) - tie); math.Abs(got-tc.wantDF) > 1e-9 {
				t.Errorf("ΔF = %v, want %v", got, tc.wantDF)
			}
			sc := NewScorer(f, rq, Host{})
			if got, ok := sc.Score(node); !ok || !sameScore(got, f.Score(node, p)) {
				t.Errorf("Scorer score %v %v, want Place and Score's %v", got, ok, f.Score(node, p))
			}
		})
	}
}

func TestScorerMemoTellsUnmetApart(t *testing.T) {
	// Two nodes alike in cards and host but not in the constraints they fail: the memo must
	// not give the second the first one's score.
	w := Workload{{Cards: 1, PerCard: 600, Weight: 0.5}, {Cards: 1, PerCard: 600, Constraint: 1, Weight: 0.5}}
	f := newFGD(w, Capacity{})
	rq := req(app(0, 300, 1))
	cs := []Card{{Index: 0, Total: 1000, Healthy: true}, {Index: 1, Total: 1000, Used: 300, Healthy: true}}
	sc := NewScorer(f, rq, Host{})
	// The memo knows a set by its array and length: long's first word is the set {1}, and
	// long[:1] is that set; long[1:] starts elsewhere and is empty of 1.
	long := ConstraintSet{}.With(1).With(64)
	for _, unmet := range []ConstraintSet{nil, ConstraintSet{}.With(1), ConstraintSet{}.With(2), long, long[:1], long[1:], ConstraintSet{0}} {
		node := Node{Cards: cs, Unmet: unmet}
		got, _ := sc.Score(node)
		want, _ := NewScorer(f, rq, Host{}).Score(node)
		if !sameScore(got, want) {
			t.Errorf("unmet %v: memo score %v, fresh %v", unmet, got, want)
		}
	}
}

// The memo keeps an entry per node scored: the node's Unmet set must not grow it.
func TestMemoEntrySize(t *testing.T) {
	if got := unsafe.Sizeof(memoEntry{}); got > 72 {
		t.Errorf("memoEntry is %d bytes, want at most 72", got)
	}
}

func TestReachOf(t *testing.T) {
	c1, c2 := ConstraintSet{}.With(1), ConstraintSet{}.With(1).With(2)
	free := func(units ...int64) []Card {
		out := make([]Card, len(units))
		for i, u := range units {
			out[i] = Card{Index: i, Total: 1000, Used: 1000 - u, Healthy: true}
		}
		return out
	}
	nodes := []Node{
		{Cards: free(1000, 500)},                                            // 1500, meets all
		{Cards: free(200), Unmet: c1},                                       // 200, fails 1
		{Cards: free(300), Unmet: c1},                                       // 300, fails 1 (another array, same set)
		{Cards: free(1000), Unmet: c2},                                      // 1000, fails 1 and 2
		{Cards: []Card{{Index: 0, Total: 1000, Healthy: false}}, Unmet: c2}, // 0 free
	}
	// Total 3000; constraint 1: only the first node, 1500; constraint 2: 1500 + 200 + 300.
	want := Reach{Total: 3000, ByConstraint: []int64{3000, 1500, 2000, 3000}}
	if diff := cmp.Diff(want, ReachOf(nodes, 4)); diff != "" {
		t.Errorf("ReachOf (-want,+got):\n%s", diff)
	}
}

func TestWorkloadByScarcity(t *testing.T) {
	w := Workload{
		{Cards: 1, PerCard: 1000, Weight: 0.5},
		{Cards: 1, PerCard: 500, Constraint: 1, Weight: 0.25},
		{Cards: 2, PerCard: 1000, Constraint: 2, Weight: 0.125},
		{Cards: 1, PerCard: 100, Constraint: 3, Weight: 0.125},
	}
	r := Reach{Total: 4000, ByConstraint: []int64{4000, 1000, 0}}
	// Constraint 1 reaches a quarter of the free units: weight × 4. Constraint 2 reaches none:
	// 0. Constraint 3 is beyond r: unchanged, as is the unconstrained shape.
	want := Workload{
		{Cards: 1, PerCard: 1000, Weight: 0.5},
		{Cards: 1, PerCard: 500, Constraint: 1, Weight: 1},
		{Cards: 2, PerCard: 1000, Constraint: 2, Weight: 0},
		{Cards: 1, PerCard: 100, Constraint: 3, Weight: 0.125},
	}
	if diff := cmp.Diff(want, w.ByScarcity(r)); diff != "" {
		t.Errorf("ByScarcity (-want,+got):\n%s", diff)
	}
	if w[1].Weight != 0.25 {
		t.Error("ByScarcity modified its receiver")
	}
	if got := w.ByScarcity(Reach{}); &got[0] != &w[0] {
		t.Error("no reach: want w itself")
	}
	plain := Workload{{Cards: 1, PerCard: 1000, Weight: 1}}
	if got := plain.ByScarcity(r); &got[0] != &plain[0] {
		t.Error("no constrained shape: want w itself")
	}
}

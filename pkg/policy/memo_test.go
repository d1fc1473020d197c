package policy

import (
	"math"
	"math/rand"
	"testing"
)

func TestScoreMemo(t *testing.T) {
	host := &Host{CPUMilli: 8000, MemoryMiB: 1024}
	base := Node{Name: "a", Cards: cards(16, 4, 16, 0), Host: host}
	for _, tc := range []struct {
		name  string
		other Node
		found bool
	}{
		{"same content, other name", Node{Name: "b", Cards: cards(16, 4, 16, 0), Host: &Host{CPUMilli: 8000, MemoryMiB: 1024}}, true},
		{"other card index", Node{Cards: []Card{{Index: 0, Total: 16, Used: 4, Healthy: true}, {Index: 2, Total: 16, Healthy: true}}, Host: host}, false},
		{"other card size", Node{Cards: cards(16, 4, 24, 0), Host: host}, false},
		{"unhealthy card", Node{Cards: []Card{{Index: 0, Total: 16, Used: 4, Healthy: true}, {Index: 1, Total: 16}}, Host: host}, false},
		{"other use", Node{Cards: cards(16, 5, 16, 0), Host: host}, false},
		{"fewer cards", Node{Cards: cards(16, 4), Host: host}, false},
		{"other host", Node{Cards: cards(16, 4, 16, 0), Host: &Host{CPUMilli: 8000, MemoryMiB: 1023}}, false},
		{"no host", Node{Cards: cards(16, 4, 16, 0)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m scoreMemo
			_, _, found, h := m.lookup(base)
			if found {
				t.Fatal("found in an empty memo")
			}
			m.store(h, base, 0.25, true)
			score, ok, found, _ := m.lookup(tc.other)
			if found != tc.found || (found && (score != 0.25 || !ok)) {
				t.Errorf("lookup = %v, %v, found %v; want found %v", score, ok, found, tc.found)
			}
			if tc.found {
				return
			}
			// A colliding hash must not hand out another node's answer: store the other
			// node under base's hash, then both are told apart by content.
			m.store(h, tc.other, 0.5, false)
			score, ok, found, _ = m.lookup(base)
			if !found || score != 0.25 || !ok {
				t.Errorf("base after a collision: %v, %v, found %v", score, ok, found)
			}
		})
	}
}

func TestScoreMemoBounds(t *testing.T) {
	var m scoreMemo
	big := Node{Cards: make([]Card, maxMemoCards+1)}
	_, _, _, h := m.lookup(big)
	m.store(h, big, 1, true)
	if len(m.entries) != 0 {
		t.Errorf("a node of %d cards was remembered", len(big.Cards))
	}
	for i := range maxMemoEntries + 10 {
		n := Node{Cards: cards(16, int64(i))}
		_, _, _, h := m.lookup(n)
		m.store(h, n, 1, true)
	}
	if len(m.entries) != maxMemoEntries {
		t.Errorf("memo holds %d entries, want at most %d", len(m.entries), maxMemoEntries)
	}
}

// TestScorerMemoMatchesFreshScores: a Scorer remembering nodes answers, bit for bit, what a
// fresh Scorer per node answers, on nodes drawn to repeat (few card states and hosts).
func TestScorerMemoMatchesFreshScores(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for g := range 200 {
		var w Workload
		for len(w) == 0 {
			w = randomWorkload(r)
		}
		pol := newFGD(w, Capacity{})
		rq, host := randomRequest(r), randomHost(r)
		sc := NewScorer(pol, rq, host)
		if sc.memo == nil {
			t.Fatal("fgd with a workload: the Scorer has no memo")
		}
		pool := make([]Node, 4)
		for i := range pool {
			pool[i] = randomNode(r, r.Intn(2) == 0)
		}
		for k := range 30 {
			node := pool[r.Intn(len(pool))]
			got, gotOK := sc.Score(node)
			want, wantOK := NewScorer(pol, rq, host).score(node)
			if gotOK != wantOK || math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("group %d node %d: memo %v %v, fresh %v %v", g, k, got, gotOK, want, wantOK)
			}
		}
	}
}

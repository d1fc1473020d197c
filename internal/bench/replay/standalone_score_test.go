package replay

import (
	"testing"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// cardsOf builds healthy cards with the given (total, used) pairs, indexes 0, 1, ...
func cardsOf(totalUsed ...int64) []policy.Card {
	var out []policy.Card
	for i := 0; i+1 < len(totalUsed); i += 2 {
		out = append(out, policy.Card{Index: i / 2, Total: totalUsed[i], Used: totalUsed[i+1], Healthy: true})
	}
	return out
}

func TestStandaloneScore(t *testing.T) {
	sick := cardsOf(16, 0, 16, 8)
	sick[0].Healthy = false
	tests := []struct {
		name   string
		policy string
		node   policy.Node
		usage  gpushare.CardUnits
		want   int64
	}{
		{
			// chosen card 12/16 = .75, node 12/32 = .375 → .75*.75+.25*.375 = .65625 → 7
			name: "binpack on a half-used card", policy: "binpack",
			node: policy.Node{Cards: cardsOf(16, 8, 16, 0)}, usage: gpushare.CardUnits{0: 4}, want: 7,
		},
		{
			// chosen card 4/16 = .25, node 4/32 = .125 → .1875+.03125 = .21875 → 2
			name: "binpack on an empty node", policy: "binpack",
			node: policy.Node{Cards: cardsOf(16, 0, 16, 0)}, usage: gpushare.CardUnits{0: 4}, want: 2,
		},
		{
			name: "binpack fills a card exactly", policy: "binpack",
			node: policy.Node{Cards: cardsOf(16, 12)}, usage: gpushare.CardUnits{0: 4}, want: 10,
		},
		{
			// 1-.65625 = .34375 → 3
			name: "spread mirrors binpack", policy: "spread",
			node: policy.Node{Cards: cardsOf(16, 8, 16, 0)}, usage: gpushare.CardUnits{0: 4}, want: 3,
		},
		{
			name: "zero capacity scores 0 for binpack", policy: "binpack",
			node: policy.Node{}, usage: gpushare.CardUnits{}, want: 0,
		},
		{
			// node used 8+4 of 32 → .375 → 4 (binpack would say 7: it weighs the chosen card)
			name: "bestfit is the node's used share", policy: "bestfit",
			node: policy.Node{Cards: cardsOf(16, 8, 16, 0)}, usage: gpushare.CardUnits{0: 4}, want: 4,
		},
		{
			// the unhealthy card counts for nothing: 8+6 of 16 → .875 → 9
			name: "bestfit on healthy cards only", policy: "bestfit",
			node: policy.Node{Cards: sick}, usage: gpushare.CardUnits{1: 6}, want: 9,
		},
		{
			// an over-committed card counts as full: (16+4)/(16+16) = .625 → 6
			name: "bestfit clamps an over-committed card", policy: "bestfit",
			node: policy.Node{Cards: cardsOf(16, 20, 16, 0)}, usage: gpushare.CardUnits{1: 4}, want: 6,
		},
		{
			name: "bestfit without capacity", policy: "bestfit",
			node: policy.Node{}, usage: gpushare.CardUnits{}, want: 0,
		},
		{
			name: "fgd is binpack's", policy: "fgd",
			node: policy.Node{Cards: cardsOf(16, 8, 16, 0)}, usage: gpushare.CardUnits{0: 4}, want: 7,
		},
	}
	s, err := newStandaloneScorer()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pol, err := policy.New(tc.policy)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.score(pol, tc.node, policy.Placement{Usage: tc.usage}); got != tc.want {
				t.Errorf("standalone score = %d, want %d", got, tc.want)
			}
		})
	}
}

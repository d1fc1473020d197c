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
	half := cardsOf(16, 8, 16, 0)
	onCard0, onCard1 := gpushare.CardUnits{0: 4}, gpushare.CardUnits{1: 4}
	sickFirst := []policy.Card{{Index: 0, Total: 16}, {Index: 1, Total: 16, Used: 8, Healthy: true}}
	tests := []struct {
		name, policy string
		cards        []policy.Card
		usage        gpushare.CardUnits
		want         int64
	}{
		// chosen card 12/16 = .75, node 12/32 = .375 → .75*.75+.25*.375 = .65625 → 7
		{"binpack on a half-used card", "binpack", half, onCard0, 7},
		// chosen card 4/16 = .25, node 4/32 = .125 → .1875+.03125 = .21875 → 2
		{"binpack on an empty node", "binpack", cardsOf(16, 0, 16, 0), onCard0, 2},
		{"binpack fills a card exactly", "binpack", cardsOf(16, 12), onCard0, 10},
		// 1-.65625 = .34375 → 3
		{"spread mirrors binpack", "spread", half, onCard0, 3},
		{"zero capacity scores 0 for binpack", "binpack", nil, gpushare.CardUnits{}, 0},
		// node used 8+4 of 32 → .375 → 4 (binpack says 7: it weighs the chosen card)
		{"bestfit is the node's used share", "bestfit", half, onCard0, 4},
		// the unhealthy card counts for nothing: 8+4 of 16 → .75 → 8
		{"bestfit on healthy cards only", "bestfit", sickFirst, onCard1, 8},
		// an over-committed card counts as full: (16+4)/(16+16) = .625 → 6
		{"bestfit clamps an over-committed card", "bestfit", cardsOf(16, 20, 16, 0), onCard1, 6},
		{"bestfit without capacity", "bestfit", nil, gpushare.CardUnits{}, 0},
		{"fgd is binpack's", "fgd", half, onCard0, 7},
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
			if got := s.score(pol, policy.Node{Cards: tc.cards}, policy.Placement{Usage: tc.usage}); got != tc.want {
				t.Errorf("standalone score = %d, want %d", got, tc.want)
			}
		})
	}
}

package policy

import (
	"testing"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

func TestScore(t *testing.T) {
	tests := []struct {
		name   string
		policy string
		node   Node
		usage  gpushare.CardUnits
		want   int64
	}{
		{
			// chosen card 12/16 = .75, node 12/32 = .375 → .75*.75+.25*.375 = .65625 → 7
			name: "binpack on a half-used card", policy: "binpack",
			node: Node{Cards: cards(16, 8, 16, 0)}, usage: gpushare.CardUnits{0: 4}, want: 7,
		},
		{
			// chosen card 4/16 = .25, node 4/32 = .125 → .1875+.03125 = .21875 → 2
			name: "binpack on an empty node", policy: "binpack",
			node: Node{Cards: cards(16, 0, 16, 0)}, usage: gpushare.CardUnits{0: 4}, want: 2,
		},
		{
			name: "binpack fills a card exactly", policy: "binpack",
			node: Node{Cards: cards(16, 12)}, usage: gpushare.CardUnits{0: 4}, want: 10,
		},
		{
			// 1-.65625 = .34375 → 3
			name: "spread mirrors binpack", policy: "spread",
			node: Node{Cards: cards(16, 8, 16, 0)}, usage: gpushare.CardUnits{0: 4}, want: 3,
		},
		{
			name: "zero capacity scores 0 for binpack", policy: "binpack",
			node: Node{}, usage: gpushare.CardUnits{}, want: 0,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pol, _ := New(tc.policy)
			if got := Score(pol, tc.node, Placement{Usage: tc.usage}); got != tc.want {
				t.Errorf("Score = %d, want %d", got, tc.want)
			}
		})
	}
}

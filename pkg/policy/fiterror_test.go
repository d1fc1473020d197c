package policy

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// TestFitErrorFields checks the numbers a FitError carries and that Error() words them the
// same whether the error came from Place or was built from the fields alone.
func TestFitErrorFields(t *testing.T) {
	sick := cards(16, 0, 16, 4)
	sick[1].Healthy = false
	tests := []struct {
		name string
		node Node
		req  gpushare.PodRequest
		want FitError
		text string
	}{
		{
			name: "one card, none has enough",
			node: Node{Cards: cards(16, 8, 16, 8)},
			req:  req(app(0, 10, 1)),
			want: FitError{Requested: 10, Cards: 1, LargestFree: 8, Free: []CardFree{{0, 8, 16, false}, {1, 8, 16, false}}},
			text: "need 10 on one card; largest free 8 (card0 8/16, card1 8/16)",
		},
		{
			name: "several cards, an unhealthy one counts as 0 free",
			node: Node{Cards: sick},
			req:  req(app(0, 8, 2)),
			want: FitError{Requested: 4, Cards: 2, LargestFree: 16, Free: []CardFree{{0, 16, 16, false}, {1, 0, 16, true}}},
			text: "need 4 on each of 2 cards; 1 of 2 cards have that free (card0 16/16, card1 unhealthy)",
		},
		{
			name: "over-committed card offers 0",
			node: Node{Cards: cards(8, 12, 16, 14)},
			req:  req(app(0, 4, 1)),
			want: FitError{Requested: 4, Cards: 1, LargestFree: 2, Free: []CardFree{{0, 0, 8, false}, {1, 2, 16, false}}},
			text: "need 4 on one card; largest free 2 (card0 0/8, card1 2/16)",
		},
		{
			// 6 goes first and leaves 2; then c0's 4 finds only those 2.
			name: "several containers: the one that failed, after the others took their share",
			node: Node{Cards: cards(8, 0)},
			req:  req(app(0, 4, 1), app(1, 6, 1)),
			want: FitError{Container: "c0", Requested: 4, Cards: 1, LargestFree: 2, Free: []CardFree{{0, 2, 8, false}}},
			text: `container "c0": need 4 on one card; largest free 2 (card0 2/8)`,
		},
		{
			name: "no cards",
			node: Node{},
			req:  req(app(0, 1, 1)),
			want: FitError{},
			text: "node has no GPU cards",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, name := range Names() {
				pol, _ := New(name)
				_, err := pol.Place(tc.node, tc.req)
				var fe *FitError
				if !errors.As(err, &fe) {
					t.Fatalf("%s: Place error %v (%T), want a *FitError", name, err, err)
				}
				if diff := cmp.Diff(tc.want, *fe, cmpopts.IgnoreUnexported(FitError{}), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("%s: fields (-want,+got):\n%s", name, diff)
				}
				if got := fe.Error(); got != tc.text {
					t.Errorf("%s: Error() = %q, want %q", name, got, tc.text)
				}
			}
			if got := tc.want.Error(); got != tc.text {
				t.Errorf("from the fields alone: Error() = %q, want %q", got, tc.text)
			}
		})
	}
}

package policy

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

func TestFirstFit(t *testing.T) {
	unhealthy := cards(16, 0, 16, 0, 16, 0)
	unhealthy[0].Healthy = false
	tests := []struct {
		name      string
		node      Node
		req       gpushare.PodRequest
		wantAlloc gpushare.PodAllocation
		wantErr   string
	}{
		{
			// free: card0 4, card1 10, card2 2: best fit would take card2, most free card1.
			name:      "lowest index with room",
			node:      Node{Cards: cards(16, 12, 16, 6, 16, 14)},
			req:       req(app(0, 2, 1)),
			wantAlloc: gpushare.PodAllocation{App: gpushare.Allocation{0: {0: 2}}},
		},
		{
			name:      "skips cards without room",
			node:      Node{Cards: cards(16, 12, 16, 6, 16, 14)},
			req:       req(app(0, 6, 1)),
			wantAlloc: gpushare.PodAllocation{App: gpushare.Allocation{0: {1: 6}}},
		},
		{
			name:      "skips unhealthy cards",
			node:      Node{Cards: unhealthy},
			req:       req(app(0, 4, 1)),
			wantAlloc: gpushare.PodAllocation{App: gpushare.Allocation{0: {1: 4}}},
		},
		{
			name:      "two cards: the first two with room",
			node:      Node{Cards: cards(16, 16, 16, 0, 16, 0, 16, 0)},
			req:       req(app(0, 32, 2)),
			wantAlloc: gpushare.PodAllocation{App: gpushare.Allocation{0: {1: 16, 2: 16}}},
		},
		{
			name:    "no card with room",
			node:    Node{Cards: cards(16, 12, 16, 14)},
			req:     req(app(0, 6, 1)),
			wantErr: "need 6 on one card; largest free 4 (card0 4/16, card1 2/16)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := FirstFit(tt.node, tt.req)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("FirstFit error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("FirstFit: %v", err)
			}
			if diff := cmp.Diff(tt.wantAlloc, p.Allocation); diff != "" {
				t.Errorf("allocation (-want +got):\n%s", diff)
			}
		})
	}
}

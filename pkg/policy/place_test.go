package policy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

func app(i int, units int64, cards int) gpushare.ContainerRequest {
	return gpushare.ContainerRequest{Ref: gpushare.ContainerRef{Index: i}, Name: "c" + string(rune('0'+i)), Kind: gpushare.App, Units: units, Cards: cards}
}

func initC(i int, units int64, kind gpushare.ContainerKind) gpushare.ContainerRequest {
	return gpushare.ContainerRequest{Ref: gpushare.ContainerRef{InitList: true, Index: i}, Name: "i" + string(rune('0'+i)), Kind: kind, Units: units, Cards: 1}
}

func req(cs ...gpushare.ContainerRequest) gpushare.PodRequest {
	return gpushare.PodRequest{Containers: cs}
}

// cards builds healthy cards from (total, used) pairs, indexed 0..n-1.
func cards(tu ...int64) []Card {
	out := make([]Card, 0, len(tu)/2)
	for i := 0; i+1 < len(tu); i += 2 {
		out = append(out, Card{Index: i / 2, Total: tu[i], Used: tu[i+1], Healthy: true})
	}
	return out
}

func TestMaxScoreMatchesExtenderAPI(t *testing.T) {
	if maxScore != extenderv1.MaxExtenderPriority {
		t.Fatalf("maxScore %d != extenderv1.MaxExtenderPriority %d", maxScore, extenderv1.MaxExtenderPriority)
	}
}

func TestPlace(t *testing.T) {
	unhealthy := cards(16, 0, 16, 0)
	unhealthy[1].Healthy = false
	tests := []struct {
		name      string
		policy    string
		node      Node
		req       gpushare.PodRequest
		wantAlloc gpushare.PodAllocation
		wantUsage gpushare.CardUnits
		wantErr   string
	}{
		{
			// 16 free on the node, but no single card has 10.
			name:    "per-card fit rejects what the node total would allow",
			policy:  "binpack",
			node:    Node{Cards: cards(16, 8, 16, 8)},
			req:     req(app(0, 10, 1)),
			wantErr: "need 10 on one card; largest free 8 (card0 8/16, card1 8/16)",
		},
		{
			// free: card0 10, card1 4, card2 6 → best fit for 4 is card1.
			name:      "binpack takes the fitting card with least free",
			policy:    "binpack",
			node:      Node{Cards: cards(16, 6, 16, 12, 16, 10)},
			req:       req(app(0, 4, 1)),
			wantAlloc: gpushare.PodAllocation{App: gpushare.Allocation{0: {1: 4}}},
			wantUsage: gpushare.CardUnits{1: 4},
		},
		{
			name:      "spread takes the card with most free",
			policy:    "spread",
			node:      Node{Cards: cards(16, 6, 16, 12, 16, 10)},
			req:       req(app(0, 4, 1)),
			wantAlloc: gpushare.PodAllocation{App: gpushare.Allocation{0: {0: 4}}},
			wantUsage: gpushare.CardUnits{0: 4},
		},
		{
			name:      "ties go to the lowest index",
			policy:    "binpack",
			node:      Node{Cards: cards(16, 0, 16, 0)},
			req:       req(app(0, 4, 1)),
			wantAlloc: gpushare.PodAllocation{App: gpushare.Allocation{0: {0: 4}}},
			wantUsage: gpushare.CardUnits{0: 4},
		},
		{
			name:      "heterogeneous cards: only the big card fits 20",
			policy:    "binpack",
			node:      Node{Cards: []Card{{Index: 0, Total: 14, Healthy: true}, {Index: 1, Total: 80, Healthy: true}}},
			req:       req(app(0, 20, 1)),
			wantAlloc: gpushare.PodAllocation{App: gpushare.Allocation{0: {1: 20}}},
			wantUsage: gpushare.CardUnits{1: 20},
		},
		{
			name:    "unhealthy card takes nothing and says so",
			policy:  "binpack",
			node:    Node{Cards: unhealthy},
			req:     req(app(0, 8, 2)),
			wantErr: "need 4 on each of 2 cards; 1 of 2 cards have that free (card0 16/16, card1 unhealthy)",
		},
		{
			// 16 over 2 cards = 8 each; binpack: card2 (8 free) and card0 (10 free).
			name:      "multi-card container gets distinct cards",
			policy:    "binpack",
			node:      Node{Cards: cards(16, 6, 16, 12, 16, 8)},
			req:       req(app(0, 16, 2)),
			wantAlloc: gpushare.PodAllocation{App: gpushare.Allocation{0: {2: 8, 0: 8}}},
			wantUsage: gpushare.CardUnits{0: 8, 2: 8},
		},
		{
			// 6 placed first (largest), on card0 (10 free → best fit); then 4 on card0 (4 left).
			name:      "containers of one pod may share a card",
			policy:    "binpack",
			node:      Node{Cards: cards(16, 6, 16, 0)},
			req:       req(app(0, 4, 1), app(1, 6, 1)),
			wantAlloc: gpushare.PodAllocation{App: gpushare.Allocation{0: {0: 4}, 1: {0: 6}}},
			wantUsage: gpushare.CardUnits{0: 10},
		},
		{
			name:    "multi-container reason names the container",
			policy:  "binpack",
			node:    Node{Cards: cards(8, 0)},
			req:     req(app(0, 4, 1), app(1, 6, 1)),
			wantErr: `container "c0": need 4 on one card; largest free 2 (card0 2/8)`,
		},
		{
			// apps 4 on card0; init 10 alone reuses the 4 and needs 6 extra on card0 (best fit
			// by extra: card0 extra 6 vs card1 extra 10). Usage max(4, 10) = 10.
			name:      "init container reuses what the pod holds",
			policy:    "binpack",
			node:      Node{Cards: cards(16, 0, 16, 0)},
			req:       req(initC(0, 10, gpushare.Init), app(0, 4, 1)),
			wantAlloc: gpushare.PodAllocation{App: gpushare.Allocation{0: {0: 4}}, Init: gpushare.Allocation{0: {0: 10}}},
			wantUsage: gpushare.CardUnits{0: 10},
		},
		{
			// sidecar 2 + app 3 run together (5 on card0); init 8 beside the sidecar needs 10
			// on card0: 5 more. Usage 10.
			name:   "sidecar runs beside inits and apps",
			policy: "binpack",
			node:   Node{Cards: cards(16, 0)},
			req:    req(initC(0, 2, gpushare.Sidecar), initC(1, 8, gpushare.Init), app(0, 3, 1)),
			wantAlloc: gpushare.PodAllocation{
				App:  gpushare.Allocation{0: {0: 3}},
				Init: gpushare.Allocation{0: {0: 2}, 1: {0: 8}},
			},
			wantUsage: gpushare.CardUnits{0: 10},
		},
		{
			name:    "no cards",
			policy:  "spread",
			node:    Node{},
			req:     req(app(0, 1, 1)),
			wantErr: "node has no GPU cards",
		},
		{
			name:      "over-committed card (shrunk under its pods) offers nothing",
			policy:    "spread",
			node:      Node{Cards: cards(8, 12, 16, 0)},
			req:       req(app(0, 4, 1)),
			wantAlloc: gpushare.PodAllocation{App: gpushare.Allocation{0: {1: 4}}},
			wantUsage: gpushare.CardUnits{1: 4},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pol, err := New(tc.policy)
			if err != nil {
				t.Fatal(err)
			}
			got, err := pol.Place(tc.node, tc.req)
			if tc.wantErr != "" {
				fe, ok := err.(*FitError)
				if !ok {
					t.Fatalf("error = %v (%T), want *FitError", err, err)
				}
				if fe.Error() != tc.wantErr {
					t.Fatalf("reason:\n got %q\nwant %q", fe.Error(), tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantAlloc, got.Allocation); diff != "" {
				t.Errorf("allocation (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantUsage, got.Usage); diff != "" {
				t.Errorf("usage (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestPlaceNeverOvercommits packs random pods until nothing fits and checks every card.
func TestPlaceNeverOvercommits(t *testing.T) {
	for _, name := range Names() {
		pol, _ := New(name)
		node := Node{Cards: cards(16, 0, 16, 0, 24, 0, 8, 0)}
		sizes := []int64{3, 5, 1, 7, 2, 8, 4, 6}
		for i := 0; i < 200; i++ {
			units := sizes[i%len(sizes)]
			n := 1 + i%2
			p, err := pol.Place(node, req(app(0, units*int64(n), n)))
			if err != nil {
				continue
			}
			for k := range node.Cards {
				node.Cards[k].Used += p.Usage[node.Cards[k].Index]
				if node.Cards[k].Used > node.Cards[k].Total {
					t.Fatalf("%s: card %d over-committed: %d/%d", name, k, node.Cards[k].Used, node.Cards[k].Total)
				}
			}
		}
	}
}

func TestNew(t *testing.T) {
	if _, err := New("nope"); err == nil {
		t.Fatal("unknown policy accepted")
	}
	for _, n := range Names() {
		p, err := New(n)
		if err != nil || p.Name() != n {
			t.Errorf("New(%q) = %v, %v", n, p, err)
		}
	}
}

func TestForChoice(t *testing.T) {
	fgd, _ := New("fgd")
	node := Node{Cards: cards(16, 4, 16, 12)} // card0 12 free, card1 4 free
	tests := []struct {
		name   string
		choice *gpushare.CardChoice
		want   string
		card   int // where a 4-unit pod goes
	}{
		{name: "no choice keeps the scheduler's", want: "fgd", card: 1},
		{name: "choice without policy keeps the scheduler's", choice: &gpushare.CardChoice{}, want: "fgd", card: 1},
		{name: "spread", choice: &gpushare.CardChoice{Policy: "spread"}, want: "spread", card: 0},
		{name: "binpack", choice: &gpushare.CardChoice{Policy: "binpack"}, want: "binpack", card: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pol := ForChoice(fgd, tt.choice)
			if pol.Name() != tt.want {
				t.Fatalf("policy %s, want %s", pol.Name(), tt.want)
			}
			p, err := pol.Place(node, req(app(0, 4, 1)))
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Allocation.Cards(); len(got) != 1 || got[0] != tt.card {
				t.Fatalf("cards %v, want [%d]", got, tt.card)
			}
		})
	}
}

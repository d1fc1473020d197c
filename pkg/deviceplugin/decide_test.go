package deviceplugin

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// TestValidAllocation: a pod's allocation is valid on this node (cards 0 and 1) when it is
// exactly its request on cards the node has (gpushare.PodRequest.ValidateAllocationOn).
func TestValidAllocation(t *testing.T) {
	e := newTestEnv(t, "t4:2")
	tests := []struct {
		name    string
		alloc   gpushare.PodAllocation // app/0 "big" wants 8 units on 2 cards; app/1 "cpu" no gpu-mem
		wantErr string
	}{
		{name: "valid", alloc: app(gpushare.CardUnits{0: 4, 1: 4})},
		{name: "units do not match the request", alloc: app(gpushare.CardUnits{0: 0, 1: 0}),
			wantErr: `container "big" (app/0): allocation holds 0 units on card 0, the request wants 4 per card`},
		{name: "too few cards", alloc: app(gpushare.CardUnits{0: 8}),
			wantErr: `container "big" (app/0): allocation lists 1 cards, the request wants 2`},
		{name: "card the node lacks", alloc: app(gpushare.CardUnits{0: 4, 7: 4}),
			wantErr: `container "big" (app/0): allocation names card 7, which the node does not have`},
		{name: "container without gpu-mem", alloc: app(gpushare.CardUnits{0: 4, 1: 4}, gpushare.CardUnits{0: 1}),
			wantErr: "allocation names container app/1, which does not exist or requests no gpu-mem"},
		{name: "empty entry for the container without gpu-mem names nothing", alloc: app(gpushare.CardUnits{0: 4, 1: 4}, gpushare.CardUnits{})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := makePod("p", 1, 1, []ctr{{name: "big", units: 8, cards: 2}, {name: "cpu"}}, tc.alloc)
			_, got, err := e.plugin.validAllocation(pod)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("error %v, want none", err)
			case tc.wantErr == "":
				if diff := cmp.Diff(tc.alloc, got); diff != "" {
					t.Errorf("allocation (-want +got):\n%s", diff)
				}
			case err == nil || err.Error() != tc.wantErr:
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

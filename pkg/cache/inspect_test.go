package cache_test

import (
	"testing"
	"time"

	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/gpushare"
)

// TestInspectUnhealthyCardRule: a node's Used counts every card, its Total only the healthy
// ones, so a pod on a card that went unhealthy stays visible as used.
func TestInspectUnhealthyCardRule(t *testing.T) {
	tests := []struct {
		name                string
		devs                []gpushare.Device
		held                gpushare.CardUnits
		wantUsed, wantTotal int64
	}{
		{
			name: "all healthy",
			devs: []gpushare.Device{{Index: 0, Units: 16, Healthy: true}, {Index: 1, Units: 8, Healthy: true}},
			held: gpushare.CardUnits{0: 6}, wantUsed: 6, wantTotal: 24,
		},
		{
			name: "pod on the unhealthy card: used, not total",
			devs: []gpushare.Device{{Index: 0, Units: 16}, {Index: 1, Units: 8, Healthy: true}},
			held: gpushare.CardUnits{0: 6}, wantUsed: 6, wantTotal: 8,
		},
		{
			name: "pod on the healthy card beside an unhealthy one",
			devs: []gpushare.Device{{Index: 0, Units: 16}, {Index: 1, Units: 8, Healthy: true}},
			held: gpushare.CardUnits{1: 4}, wantUsed: 4, wantTotal: 8,
		},
		{
			name: "every card unhealthy: used exceeds total",
			devs: []gpushare.Device{{Index: 0, Units: 16}},
			held: gpushare.CardUnits{0: 6}, wantUsed: 6, wantTotal: 0,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var units int64 // the pod requests what it holds: a record that does not match is not trusted
			for _, u := range tc.held {
				units += u
			}
			env := ct.Start(t, time.Minute, ct.NodeWith("n1", tc.devs...), ct.Placed(ct.Pod("p", units), "n1", tc.held))
			n, ok := env.Cache.InspectNode("n1")
			if !ok {
				t.Fatal("node n1 not in the cache")
			}
			if n.Used != tc.wantUsed || n.Total != tc.wantTotal {
				t.Errorf("used %d of %d, want %d of %d", n.Used, n.Total, tc.wantUsed, tc.wantTotal)
			}
		})
	}
}

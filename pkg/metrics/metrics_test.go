package metrics

import (
	"testing"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/gpushare"
)

type fakeSource struct {
	nodes  []gpushare.InspectNode
	ledger cache.AnomalyStats
}

func (f fakeSource) Inspect() []gpushare.InspectNode { return f.nodes }
func (f fakeSource) Anomalies() cache.AnomalyStats   { return f.ledger }

func TestLedgerSeries(t *testing.T) {
	src := fakeSource{
		nodes: []gpushare.InspectNode{
			// n1: card 0 holds 20 of 16 (over), card 1 16 of 16 (full, not over)
			{Name: "n1", Cards: []gpushare.InspectCard{{Index: 0, Total: 16, Used: 20}, {Index: 1, Total: 16, Used: 16}}},
			// n2: card 3 vanished from the inventory under a 4-unit pod: 4 of 0 (over)
			{Name: "n2", Cards: []gpushare.InspectCard{{Index: 3, Total: 0, Used: 4}}},
		},
		ledger: cache.AnomalyStats{Conservative: 2, Counts: map[string]uint64{"invalid": 3, "changed": 1}},
	}
	mfs, err := New(src).Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			switch {
			case m.GetGauge() != nil:
				got[key] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				got[key] = m.GetCounter().GetValue()
			}
		}
	}
	want := map[string]float64{
		"gpushare_card_overcommitted":                             2,
		"gpushare_pod_allocation_anomalies_total{reason=changed}": 1,
		"gpushare_pod_allocation_anomalies_total{reason=invalid}": 3,
		"gpushare_pod_allocation_anomalies_total{reason=missing}": 0,
		"gpushare_pods_conservative":                              2,
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, w)
		}
	}
}

func TestLeaderGauge(t *testing.T) {
	m := New(nil)
	gauge := func() float64 {
		t.Helper()
		mfs, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "gpushare_leader" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("gpushare_leader not gathered")
		return 0
	}
	tests := []struct {
		name string
		set  *bool // nil: the start value
		want float64
	}{
		{"starts at 0", nil, 0},
		{"leading", new(true), 1},
		{"stopped leading", new(false), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.set != nil {
				m.SetLeader(*tc.set)
			}
			if got := gauge(); got != tc.want {
				t.Errorf("gpushare_leader = %v, want %v", got, tc.want)
			}
		})
	}
}

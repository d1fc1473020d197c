package schedulerplugin

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/gpushare"
)

// TestFactoryRegistersLedgerMetrics: the factory gpushare-scheduler registers adds the
// ledger's per-card gauges to the registry it is given; a second instance (another
// profile) on the same registry is not an error.
func TestFactoryRegistersLedgerMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	factory := Factory(Options{Registerer: reg})
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset(ct.Node("n1", 16, 16), ct.Placed(ct.Pod("a", 6), "n1", gpushare.CardUnits{1: 6}))
	inf := informers.NewSharedInformerFactory(client, 0)
	p, err := factory(ctx, nil, &fakeHandle{client: client, factory: inf})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	second, err := factory(ctx, nil, &fakeHandle{client: client, factory: informers.NewSharedInformerFactory(client, 0)})
	if err != nil {
		cancel()
		t.Fatalf("second instance on the same registry: %v", err)
	}
	if second.(*Plugin).narrowings != p.(*Plugin).narrowings {
		t.Error("the second instance counts narrowings into series of its own, not the registered ones")
	}
	inf.Start(ctx.Done())
	t.Cleanup(func() { cancel(); inf.Shutdown() })
	ct.Eventually(t, "ledger ready", p.(*Plugin).cache.Ready)
	ct.Eventually(t, "card 1 holds 6 units in the metrics", func() bool {
		n, err := testutil.GatherAndCount(reg, "gpushare_card_allocated_units")
		return err == nil && n == 2 && gaugeValue(reg, "gpushare_card_allocated_units", "n1", "1") == 6
	})
}

// gaugeValue is the value of the per-card metric name of node and card, -1 when absent.
func gaugeValue(reg *prometheus.Registry, name, node, card string) float64 {
	families, err := reg.Gather()
	if err != nil {
		return -1
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["node"] == node && labels["card"] == card {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

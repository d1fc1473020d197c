package cache_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/cache"
	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/metrics"
	"github.com/gpushare/gpushare/pkg/reasons"
)

// nodeInUnit is a labelled node whose inventory publishes cards of these sizes in unit.
func nodeInUnit(name string, unit gpushare.Unit, cardUnits ...int64) *corev1.Node {
	n := ct.BareNode(name)
	inv := gpushare.Inventory{Unit: unit}
	for i, u := range cardUnits {
		inv.Devices = append(inv.Devices, gpushare.Device{Index: i, Units: u, Healthy: true})
	}
	s, err := inv.Marshal()
	if err != nil {
		panic(err)
	}
	n.Annotations = map[string]string{gpushare.AnnotationNodeInventory: s}
	return n
}

// TestInventoryOutOfRange: a node publishing a card of 9e18 units takes no GPU pod, with a
// reason naming the value that kubectl describe shows and preemption cannot help, and adds
// nothing to Capacity; fixed, it counts again, and broken again it stops.
func TestInventoryOutOfRange(t *testing.T) {
	huge := ct.Node("big", 9_000_000_000_000_000_000)
	env := ct.StartTracking(t, ct.Node("a", 16, 16), huge)
	pol := binpack(t)
	pod := ct.Pod("p", 4)
	req := request(t, pod)
	wording := reasons.NewWording(gpushare.DefaultResources(), "cgpu=true")
	const want = "node's GPU inventory is out of range, it takes no GPU pod until fixed: annotation gpushare.io/gpu-inventory: " +
		"card 0 units 9000000000000000000 out of range 0..4294967296"

	refused := func(t *testing.T) {
		t.Helper()
		errs := map[string]error{"Fits": env.Cache.Fits("big", req, pol)}
		_, errs["PlaceWith"] = env.Cache.PlaceWith("big", req, pol, nil)
		rsv, err := env.Cache.Reserve(context.Background(), "big", pod, req, pol)
		if err == nil {
			env.Cache.Finish(rsv, cache.BindRefused)
		}
		errs["Reserve"] = err
		for call, err := range errs {
			if !errors.As(err, new(*cache.InventoryError)) {
				t.Errorf("%s(big) = %v, want *cache.InventoryError", call, err)
				continue
			}
			rej := wording.Reject(err)
			if want := (reasons.Rejection{Reason: want, Label: metrics.RejectInventory}); rej != want {
				t.Errorf("%s(big) rejected as %+v, want %+v", call, rej, want)
			}
		}
	}
	refused(t)
	if got := env.Cache.Capacity().Units; got != 32 {
		t.Fatalf("Capacity().Units = %d, want 32 (node a alone)", got)
	}

	ctx := context.Background()
	if _, err := env.Client.CoreV1().Nodes().Update(ctx, ct.Node("big", 16), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ct.Eventually(t, "fixed inventory counted", func() bool {
		return env.Cache.Fits("big", req, pol) == nil && env.Cache.Capacity().Units == 48
	})
	if _, err := env.Client.CoreV1().Nodes().Update(ctx, huge, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ct.Eventually(t, "broken again: refused, not counted", func() bool {
		err := env.Cache.Fits("big", req, pol)
		return err != nil && strings.Contains(err.Error(), "out of range") && env.Cache.Capacity().Units == 32
	})
	refused(t)
}

// TestCapacityPerUnit: a node publishing MiB units in a GiB cluster adds its memory, not
// 1024 times it: 2 × 16 GiB plus 16384 MiB is 48 GiB units.
func TestCapacityPerUnit(t *testing.T) {
	env := ct.StartTracking(t, ct.Node("gib", 16, 16), nodeInUnit("mib", gpushare.Unit{MiB: 1}, 16384))
	ct.Eventually(t, "both nodes counted", func() bool { return env.Cache.Capacity().Units == 48 })
	if err := env.Client.CoreV1().Nodes().Delete(context.Background(), "gib", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ct.Eventually(t, "MiB alone, in MiB", func() bool { return env.Cache.Capacity().Units == 16384 })
}

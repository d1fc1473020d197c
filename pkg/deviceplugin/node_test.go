package deviceplugin

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/nodecards"
	"github.com/gpushare/gpushare/pkg/noderuntime"
	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

func TestPublishNode(t *testing.T) {
	e := newTestEnv(t, "t4,a100-80gb")
	ctx := context.Background()
	if err := e.plugin.publishNode(ctx); err != nil {
		t.Fatal(err)
	}
	node, err := e.client.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Each card its own size: floor(15079/1024) = 14, floor(81920/1024) = 80.
	want := gpushare.Inventory{Unit: gpushare.GiB, Devices: []gpushare.Device{
		{Index: 0, UUID: uuid(0), Model: "Tesla T4", Units: 14, MemoryMiB: 15079, Healthy: true},
		{Index: 1, UUID: uuid(1), Model: "NVIDIA A100-SXM4-80GB", Units: 80, MemoryMiB: 81920, Healthy: true},
	}}
	got, err := gpushare.ParseInventory(node.Annotations[gpushare.AnnotationNodeInventory])
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("inventory annotation (-want,+got):\n%s", diff)
	}
	for _, rl := range []corev1.ResourceList{node.Status.Capacity, node.Status.Allocatable} {
		if q := rl[gpushare.DefaultCountResource]; q.Value() != 2 {
			t.Errorf("%s = %s, want 2", gpushare.DefaultCountResource, q.String())
		}
	}
	// The extender's reader agrees.
	inv, src, err := gpushare.DefaultResources().NodeInventory(node)
	if err != nil || src != gpushare.FromAnnotation || inv.TotalUnits() != 94 {
		t.Errorf("NodeInventory = %d units from %s, %v; want 94 from the annotation", inv.TotalUnits(), src, err)
	}

	// A kubelet that zeroed gpu-count gets it back; an unchanged node is not patched.
	node.Status.Capacity[gpushare.DefaultCountResource] = resource.MustParse("0")
	if _, err := e.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.client.ClearActions()
	if err := e.plugin.publishNode(ctx); err != nil {
		t.Fatal(err)
	}
	if n := countPatches(e); n != 1 {
		t.Errorf("publishNode after gpu-count was zeroed sent %d patches, want 1 (status)", n)
	}
	e.client.ClearActions()
	if err := e.plugin.publishNode(ctx); err != nil {
		t.Fatal(err)
	}
	if n := countPatches(e); n != 0 {
		t.Errorf("publishNode on an up-to-date node sent %d patches, want 0", n)
	}
}

func countPatches(e *testEnv) int {
	n := 0
	for _, a := range e.client.Actions() {
		if a.GetVerb() == "patch" {
			n++
		}
	}
	return n
}

func TestCheckMessageSize(t *testing.T) {
	a100x8 := make([]gpunvml.Device, 8)
	for i := range a100x8 {
		a100x8[i] = gpunvml.Device{Index: i, UUID: gpunvml.SimulatedUUID("n", i), Model: "A100", MemoryMiB: 81920}
	}
	tests := []struct {
		name    string
		devs    []gpunvml.Device
		unit    string
		wantErr bool
	}{
		{name: "8x80GB in GiB fits", devs: a100x8, unit: "GiB"},
		{name: "8x80GB in MiB is refused", devs: a100x8, unit: "MiB", wantErr: true},
		{name: "one T4 in MiB fits", devs: a100x8[:1:1], unit: "256MiB"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			unit, err := gpushare.ParseUnit(tc.unit)
			if err != nil {
				t.Fatal(err)
			}
			cards, err := nodecards.BuildCards(tc.devs, unit)
			if err != nil {
				t.Fatal(err)
			}
			err = checkMessageSize(cards, unit)
			if (err != nil) != tc.wantErr {
				t.Fatalf("checkMessageSize(%s) = %v, wantErr %v", tc.unit, err, tc.wantErr)
			}
			if err == nil {
				return
			}
			// The suggested unit fits and one MiB less does not.
			const marker = "smallest unit that fits is "
			s := err.Error()
			i := strings.Index(s, marker)
			if i < 0 {
				t.Fatalf("error %q does not name the smallest unit", s)
			}
			parsed, perr := gpushare.ParseUnit(s[i+len(marker):])
			if perr != nil {
				t.Fatalf("error %q does not end with a unit: %v", s, perr)
			}
			mib := parsed.MiB
			if messageBytes(withUnit(cards, gpushare.Unit{MiB: mib})) > maxMessageBytes {
				t.Errorf("suggested %d MiB does not fit", mib)
			}
			if messageBytes(withUnit(cards, gpushare.Unit{MiB: mib - 1})) <= maxMessageBytes {
				t.Errorf("suggested %d MiB is not the smallest: %d MiB fits too", mib, mib-1)
			}
			t.Logf("refusal: %v", err)
		})
	}
}

func TestNewRefusesOversizedUnit(t *testing.T) {
	e := newTestEnv(t, "t4")
	cards, err := gpunvml.ParseSimSpec("a100-80gb:8")
	if err != nil {
		t.Fatal(err)
	}
	sim, err := gpunvml.NewSimulator(testNode, cards)
	if err != nil {
		t.Fatal(err)
	}
	nv, err := gpunvml.New(sim.Library())
	if err != nil {
		t.Fatal(err)
	}
	node := func(unit gpushare.Unit) *noderuntime.Node {
		t.Helper()
		n, err := noderuntime.New(noderuntime.Config{Name: testNode, Unit: unit, NVML: nv, Client: e.client, Pods: e.plugin.pods})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	cfg := e.plugin.cfg
	if _, err := New(cfg, node(gpushare.Unit{MiB: 1})); err == nil || !strings.Contains(err.Error(), "smallest unit that fits is 10MiB") {
		t.Errorf("New with MiB units on 8x80GB: error %v, want the 10MiB suggestion", err)
	}
	if _, err := New(cfg, node(gpushare.Unit{MiB: 10})); err != nil {
		t.Errorf("New with the suggested 10MiB unit: %v", err)
	}
}

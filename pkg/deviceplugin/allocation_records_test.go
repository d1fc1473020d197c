package deviceplugin

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// TestRestoreEditedRecord: once every gpu-mem container of a pod is served, a record that
// names other cards, or none, is written back to the served cards; a true record is left
// alone.
func TestRestoreEditedRecord(t *testing.T) {
	tests := []struct {
		name, edit string
		unit       string // the unit annotation the edit sets too ("" leaves none)
		wantPatch  bool
	}{
		{name: "moved to another card", edit: `{"0":{"1":6}}`, wantPatch: true},
		{name: "zero units", edit: `{"0":{"0":0}}`, wantPatch: true},
		{name: "not JSON", edit: `{not json`, wantPatch: true},
		{name: "unchanged", edit: `{"0":{"0":6}}`},
		{name: "unchanged in the node's unit", edit: `{"0":{"0":6}}`, unit: "GiB"},
		{name: "in another unit", edit: `{"0":{"0":6}}`, unit: "MiB", wantPatch: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t, "t4:2", makePod("p", 1, 10, []ctr{{name: "main", units: 6}}, app(gpushare.CardUnits{0: 6})))
			if got, err := e.allocate(t, 6); err != nil || got[gpushare.EnvIndex] != "0" {
				t.Fatalf("p: Allocate(6) = %v, %v; want card 0", got, err)
			}
			edit := map[string]string{gpushare.AnnotationAllocation: tc.edit}
			if tc.unit != "" {
				edit[gpushare.AnnotationUnit] = tc.unit
			}
			e.editAnnotations(t, "p", edit)
			before := len(e.client.Actions())
			e.plugin.restoreAllocationRecords(context.Background(), e.plugin.podsOnNode())
			patched := false
			for _, a := range e.client.Actions()[before:] {
				patched = patched || a.GetVerb() == "patch"
			}
			if patched != tc.wantPatch {
				t.Fatalf("patched %v, want %v", patched, tc.wantPatch)
			}
			pod, err := e.client.CoreV1().Pods("default").Get(context.Background(), "p", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := pod.Annotations[gpushare.AnnotationAllocation]; got != `{"0":{"0":6}}` {
				t.Errorf("record %q, want the served card back: %q", got, `{"0":{"0":6}}`)
			}
			if got := pod.Annotations[gpushare.AnnotationIndex]; tc.wantPatch && got != "0" {
				t.Errorf("%s=%q, want 0", gpushare.AnnotationIndex, got)
			}
			if got := pod.Annotations[gpushare.AnnotationUnit]; tc.wantPatch && got != "GiB" {
				t.Errorf("%s=%q, want the plugin's unit GiB", gpushare.AnnotationUnit, got)
			}
		})
	}
}

// After a restart the plugin adopts the pods its predecessor served (progress annotation
// or ASSIGNED=true with a valid allocation); pods not yet served are not adopted.
func TestRebuildAfterRestart(t *testing.T) {
	served := makePod("a", 1, 10, []ctr{{name: "m", units: 4}}, app(gpushare.CardUnits{0: 4}))
	served.Annotations[gpushare.AnnotationAssigned] = "true"
	half := makePod("b", 2, 11, []ctr{{name: "x", units: 2}, {name: "y", units: 2}}, app(gpushare.CardUnits{1: 2}, gpushare.CardUnits{0: 2}))
	half.Annotations[gpushare.AnnotationAllocated] = "app/0"
	pending := makePod("c", 3, 12, []ctr{{name: "m", units: 5}}, app(gpushare.CardUnits{1: 5}))
	e := newTestEnv(t, "t4:2", served, half, pending)

	if n := e.plugin.adoptServedPods(e.plugin.podsOnNode()); n != 2 {
		t.Errorf("adoptServedPods adopted %d pods, want 2", n)
	}
	got := e.plugin.servedReport()
	want := gpushare.ServedReport{
		Node: testNode,
		Cards: []gpushare.ServedCard{
			{Index: 0, UUID: uuid(0), TotalUnits: 14, ServedUnits: 4},
			{Index: 1, UUID: uuid(1), TotalUnits: 14, ServedUnits: 2},
		},
		Containers: []gpushare.ServedContainer{
			{Namespace: "default", Name: "a", UID: "uid-a", Container: "app/0", Cards: gpushare.CardUnits{0: 4}},
			{Namespace: "default", Name: "b", UID: "uid-b", Container: "app/0", Cards: gpushare.CardUnits{1: 2}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("servedReport after adoptServedPods (-want,+got):\n%s", diff)
	}
	// b's second container is served next, on its own card 0.
	if env, err := e.allocate(t, 2); err != nil || env[gpushare.EnvIndex] != "0" {
		t.Errorf("Allocate(2) = %v, %v; want b/y on card 0", env, err)
	}
}

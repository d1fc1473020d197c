package cache_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/cache"
	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/gpushare"
)

var mib = gpushare.Unit{MiB: 1}

// unitNode is ct.Node publishing its inventory in unit.
func unitNode(name string, unit gpushare.Unit, cardUnits ...int64) *corev1.Node {
	n := ct.Node(name)
	inv := gpushare.Inventory{Unit: unit}
	for i, u := range cardUnits {
		inv.Devices = append(inv.Devices, gpushare.Device{Index: i, Units: u, MemoryMiB: u * unit.MiB, Healthy: true})
	}
	s, err := inv.Marshal()
	if err != nil {
		panic(err)
	}
	n.Annotations[gpushare.AnnotationNodeInventory] = s
	return n
}

// inUnit sets the pod's record unit annotation ("" removes it).
func inUnit(pod *corev1.Pod, unit string) *corev1.Pod {
	delete(pod.Annotations, gpushare.AnnotationUnit)
	if unit != "" {
		pod.Annotations[gpushare.AnnotationUnit] = unit
	}
	return pod
}

// TestRecordsOfAnotherUnitAfterUnitChange: three 4 GiB pods on a T4 (14 GiB units) whose node
// then publishes MiB (15079 units) are not read as 12 MiB: each counts its request converted
// to MiB on every card, and an 8000 MiB pod no longer fits beside them.
func TestRecordsOfAnotherUnitAfterUnitChange(t *testing.T) {
	env, rec := startRecording(t,
		unitNode("n1", gpushare.GiB, 14),
		inUnit(ct.Placed(ct.Pod("a", 4), "n1", gpushare.CardUnits{0: 4}), "GiB"),
		inUnit(ct.Placed(ct.Pod("b", 4), "n1", gpushare.CardUnits{0: 4}), "GiB"),
		inUnit(ct.Placed(ct.Pod("c", 4), "n1", gpushare.CardUnits{0: 4}), "GiB"))
	if got, want := cards(env.Cache, "n1"), "0:12/14"; got != want {
		t.Fatalf("in GiB: %q, want %q", got, want)
	}
	if _, err := env.Client.CoreV1().Nodes().Update(context.Background(), unitNode("n1", mib, 15079), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ct.Eventually(t, "the GiB records count 4096 MiB each", func() bool { return cards(env.Cache, "n1") == "0:12288/15079" })
	if d := cmp.Diff([]string{"a", "b", "c"}, conservative(t, env.Cache, "n1")); d != "" {
		t.Errorf("conservative pods (-want,+got):\n%s", d)
	}
	for range 3 {
		if got, want := nextEvent(t, rec), "it counts in GiB, node n1 counts in MiB; counted on every card of node n1 until a valid record appears, for 2m0s at most: card0=4096 units"; !strings.HasSuffix(got, want) {
			t.Errorf("event:\n got %q\nwant suffix %q", got, want)
		}
	}
	big := ct.Pod("big", 8000)
	if _, err := env.Cache.Reserve(t.Context(), "n1", big, request(t, big), binpack(t)); err == nil {
		t.Fatalf("Reserve of 8000 MiB beside three 4 GiB pods on a 15079 MiB card succeeded")
	}
	// Past the grace period each is charged to the node as a whole: 4096 MiB, not 4.
	env.Clock.Step(cache.DefaultUnrecordedGrace)
	env.Cache.EndGraceNow()
	if got, want := cards(env.Cache, "n1"), "0:12288/15079"; got != want {
		t.Errorf("charged after the grace period: %q, want %q", got, want)
	}
}

// TestRecordUnitAgainstTheNodes: a record counts as written when it names the node's unit or
// none (older writers); one in another unit or an unreadable one does not.
func TestRecordUnitAgainstTheNodes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		node      *corev1.Node
		unit      string // the record's unit annotation; "" none
		wantCards string
		wantCons  bool
	}{
		{name: "no unit on a MiB node", node: unitNode("n1", mib, 15079), wantCards: "0:4/15079"},
		{name: "MiB on a MiB node", node: unitNode("n1", mib, 15079), unit: "MiB", wantCards: "0:4/15079"},
		{name: "1024MiB on a GiB node", node: unitNode("n1", gpushare.GiB, 14), unit: "1024MiB", wantCards: "0:4/14"},
		{name: "GiB on an allocatable node (GiB)", node: ct.AllocatableNode("n1", 14, 1), unit: "GiB", wantCards: "0:4/14"},
		{name: "MiB on an allocatable node (GiB)", node: ct.AllocatableNode("n1", 14, 1), unit: "MiB", wantCards: "0:1/14", wantCons: true},
		{name: "256MiB on a GiB node", node: unitNode("n1", gpushare.GiB, 14), unit: "256MiB", wantCards: "0:1/14", wantCons: true},
		{name: "unreadable unit", node: unitNode("n1", gpushare.GiB, 14), unit: "4KiB", wantCards: "0:4/14", wantCons: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := ct.Start(t, 0, tc.node, inUnit(ct.Placed(ct.Pod("a", 4), "n1", gpushare.CardUnits{0: 4}), tc.unit))
			if got := cards(env.Cache, "n1"); got != tc.wantCards {
				t.Errorf("cards %q, want %q", got, tc.wantCards)
			}
			if got := len(conservative(t, env.Cache, "n1")) > 0; got != tc.wantCons {
				t.Errorf("conservative = %v, want %v", got, tc.wantCons)
			}
		})
	}
}

// TestReservationCarriesTheNodesUnit: Reserve hands the binder the unit the node publishes,
// and no unit for a node whose unit nobody states.
func TestReservationCarriesTheNodesUnit(t *testing.T) {
	for _, tc := range []struct {
		name string
		node *corev1.Node
		want gpushare.Unit
	}{
		{name: "MiB inventory", node: unitNode("n1", mib, 15079), want: mib},
		{name: "GiB inventory", node: unitNode("n1", gpushare.GiB, 14), want: gpushare.GiB},
		{name: "allocatable fallback", node: ct.AllocatableNode("n1", 14, 1), want: gpushare.Unit{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := ct.Start(t, 0, tc.node)
			pod := ct.Pod("p", 4)
			r, err := env.Cache.Reserve(t.Context(), "n1", pod, request(t, pod), binpack(t))
			if err != nil {
				t.Fatal(err)
			}
			if r.Unit != tc.want {
				t.Errorf("Reservation.Unit = %v, want %v", r.Unit, tc.want)
			}
		})
	}
}

package deviceplugin

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

var mib = gpushare.Unit{MiB: 1}

// recordedIn is a running 4-unit pod on card 0 whose record names unit ("" none).
func recordedIn(name, unit string) *corev1.Pod {
	pod := makePod(name, 0, 0, []ctr{{name: "main", units: 4}}, app(gpushare.CardUnits{0: 4}))
	pod.Status.Phase = corev1.PodRunning
	if unit != "" {
		pod.Annotations[gpushare.AnnotationUnit] = unit
	}
	return pod
}

// publishing sets the test node's inventory annotation to one naming unit.
func publishing(t *testing.T, e *testEnv, unit gpushare.Unit) {
	t.Helper()
	inv, err := gpushare.Inventory{Unit: unit, Devices: []gpushare.Device{{Index: 0, Units: 14, Healthy: true}}}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, Annotations: map[string]string{gpushare.AnnotationNodeInventory: inv}}}
	if _, err := e.client.CoreV1().Nodes().Update(context.Background(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestCheckUnitChange(t *testing.T) {
	finished := recordedIn("done", "GiB")
	finished.Status.Phase = corev1.PodSucceeded
	terminating := recordedIn("leaving", "GiB")
	terminating.DeletionTimestamp = &metav1.Time{Time: epoch}
	unrecorded := recordedIn("self", "")
	unrecorded.Annotations = nil
	for _, tc := range []struct {
		name      string
		unit      gpushare.Unit  // --memory-unit
		published *gpushare.Unit // the node's inventory unit; nil: none
		pods      []runtime.Object
		want      string // "" means started
	}{{
		name: "GiB records under a new MiB unit", unit: mib, published: &gpushare.GiB,
		pods: []runtime.Object{recordedIn("b", "GiB"), recordedIn("a", "GiB")},
		want: "--memory-unit=MiB but pods default/a, default/b on this node hold records in GiB: drain the node first (kubectl drain gpu-node --ignore-daemonsets), or start with the unit they were placed in",
	}, {
		name: "unit-less records count in the published unit", unit: mib, published: &gpushare.GiB,
		pods: []runtime.Object{recordedIn("a", "")},
		want: "--memory-unit=MiB but pods default/a on this node hold records in GiB: drain the node first (kubectl drain gpu-node --ignore-daemonsets), or start with the unit they were placed in",
	}, {
		name: "a terminating pod still holds its memory", unit: mib, published: &mib,
		pods: []runtime.Object{terminating},
		want: "--memory-unit=MiB but pods default/leaving on this node hold records in GiB: drain the node first (kubectl drain gpu-node --ignore-daemonsets), or start with the unit they were placed in",
	}, {
		name: "several units and an unreadable one", unit: gpushare.GiB, published: &gpushare.GiB,
		pods: []runtime.Object{recordedIn("a", "MiB"), recordedIn("b", "256MiB"), recordedIn("c", "lots"), recordedIn("d", "GiB")},
		want: `--memory-unit=GiB but pods default/c on this node hold records in "lots"; pods default/b on this node hold records in 256MiB; pods default/a on this node hold records in MiB: drain the node first (kubectl drain gpu-node --ignore-daemonsets), or start with the unit they were placed in`,
	}, {
		name: "same unit", unit: gpushare.GiB, published: &gpushare.GiB,
		pods: []runtime.Object{recordedIn("a", "GiB"), recordedIn("b", "")},
	}, {
		name: "records that name the new unit", unit: mib, published: &gpushare.GiB,
		pods: []runtime.Object{recordedIn("a", "MiB")},
	}, {
		name: "unit-less records on a node that publishes no unit", unit: mib,
		pods: []runtime.Object{recordedIn("a", "")},
	}, {
		name: "finished pods and pods without a record", unit: mib, published: &gpushare.GiB,
		pods: []runtime.Object{finished, unrecorded},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnvUnit(t, "t4", tc.unit, tc.pods...)
			if tc.published != nil {
				publishing(t, e, *tc.published)
			}
			err := e.plugin.checkUnitChange(context.Background())
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("checkUnitChange = %v, want nil", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Fatalf("checkUnitChange = %v\nwant %s", err, tc.want)
			}
		})
	}
}

// TestRunRefusesAUnitChange: Run returns the refusal before publishing the inventory in the
// new unit.
func TestRunRefusesAUnitChange(t *testing.T) {
	e := newTestEnvUnit(t, "t4", mib, recordedIn("a", "GiB"))
	publishing(t, e, gpushare.GiB)
	if err := e.plugin.Run(context.Background()); err == nil {
		t.Fatal("Run started with MiB beside a pod whose record is in GiB")
	}
	node, err := e.client.CoreV1().Nodes().Get(context.Background(), testNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if inv, err := gpushare.ParseInventory(node.Annotations[gpushare.AnnotationNodeInventory]); err != nil || inv.Unit != gpushare.GiB {
		t.Errorf("published inventory unit %v (%v), want GiB left as it was", inv.Unit, err)
	}
}

// TestRecordInAnotherUnitIsNoAllocation: share-plugin does not take a record in another unit
// as the pod's cards.
func TestRecordInAnotherUnitIsNoAllocation(t *testing.T) {
	e := newTestEnvUnit(t, "t4", mib)
	for _, tc := range []struct {
		unit    string
		wantErr bool
	}{{"", false}, {"MiB", false}, {"GiB", true}, {"lots", true}} {
		_, _, err := e.plugin.validAllocation(recordedIn("a", tc.unit))
		if (err != nil) != tc.wantErr {
			t.Errorf("record in %q: validAllocation error %v, want error %v", tc.unit, err, tc.wantErr)
		}
	}
}

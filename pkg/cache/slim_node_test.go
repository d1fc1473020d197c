package cache

import (
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

func TestNodeTransform(t *testing.T) {
	res := gpushare.DefaultResources()
	// Listed out of index order: the slim node keeps them sorted.
	inv := `{"unit":"GiB","devices":[{"index":1,"uuid":"GPU-b","units":14,"healthy":false},{"index":0,"uuid":"GPU-a","model":"Tesla T4","units":14,"healthy":true}]}`
	allocatable := func(mem, count string) corev1.ResourceList {
		l := corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"),
			corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		}
		if mem != "" {
			l[res.Mem], l[res.Count] = resource.MustParse(mem), resource.MustParse(count)
		}
		return l
	}
	id := objectMeta{name: "n1", uid: "u", resourceVersion: "3"}
	host := policy.Host{CPUMilli: 8000, MemoryMiB: 32 * 1024}
	tests := []struct {
		name   string
		ann    map[string]string
		alloc  corev1.ResourceList
		want   *slimNode
		errSub string
		// isolation is the node's gpushare.LabelIsolation value ("": no label); isoErrSub a
		// substring of the error it must give.
		isolation, isoErrSub string
	}{{
		name:  "inventory annotation",
		ann:   map[string]string{gpushare.AnnotationNodeInventory: inv, "node.alpha.kubernetes.io/ttl": "0"},
		alloc: allocatable("28", "2"),
		want: &slimNode{objectMeta: id, iso: gpushare.IsolationNone, src: gpushare.FromAnnotation, alloc: host, inv: gpushare.Inventory{Unit: gpushare.GiB, Devices: []gpushare.Device{
			{Index: 0, UUID: "GPU-a", Model: "Tesla T4", Units: 14, Healthy: true}, {Index: 1, UUID: "GPU-b", Units: 14}}}},
	}, {
		name:  "no annotation: identical cards from allocatable gpu-mem / gpu-count",
		alloc: allocatable("28", "2"),
		// 28 units / 2 cards = 14 each.
		want: &slimNode{objectMeta: id, iso: gpushare.IsolationNone, src: gpushare.FromAllocatable, alloc: host, inv: gpushare.Inventory{Unit: gpushare.GiB, Devices: []gpushare.Device{
			{Index: 0, Units: 14, Healthy: true}, {Index: 1, Units: 14, Healthy: true}}}},
	}, {
		name:   "malformed annotation: the allocatable fallback and the error",
		ann:    map[string]string{gpushare.AnnotationNodeInventory: "{oops"},
		alloc:  allocatable("16", "1"),
		want:   &slimNode{objectMeta: id, iso: gpushare.IsolationNone, src: gpushare.FromAllocatable, alloc: host, inv: gpushare.Inventory{Unit: gpushare.GiB, Devices: []gpushare.Device{{Index: 0, Units: 16, Healthy: true}}}},
		errSub: gpushare.AnnotationNodeInventory,
	}, {
		name:  "no GPU at all",
		alloc: allocatable("", ""),
		want:  &slimNode{objectMeta: id, iso: gpushare.IsolationNone, src: gpushare.FromAllocatable, alloc: host, inv: gpushare.Inventory{Unit: gpushare.GiB}},
	}, {
		name: "no allocatable: zero host",
		want: &slimNode{objectMeta: id, iso: gpushare.IsolationNone, src: gpushare.FromAllocatable, inv: gpushare.Inventory{Unit: gpushare.GiB}},
	}, {
		name:      "isolated with MPS",
		isolation: "mps",
		want:      &slimNode{objectMeta: id, iso: gpushare.IsolationMPS, src: gpushare.FromAllocatable, inv: gpushare.Inventory{Unit: gpushare.GiB}},
	}, {
		name:      "invalid isolation label: kept as an error",
		isolation: "mps,none",
		want:      &slimNode{objectMeta: id, src: gpushare.FromAllocatable, inv: gpushare.Inventory{Unit: gpushare.GiB}},
		isoErrSub: gpushare.LabelIsolation,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			node := &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u", ResourceVersion: "3", Labels: map[string]string{"cgpu": "true"},
					Annotations: tc.ann, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
				Status: corev1.NodeStatus{
					Allocatable: tc.alloc,
					Images:      []corev1.ContainerImage{{Names: []string{"registry/some/image:tag"}, SizeBytes: 1 << 30}},
					Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
				},
			}
			if tc.isolation != "" {
				node.Labels[gpushare.LabelIsolation] = tc.isolation
			}
			out, err := nodeTransform(res, false)(node)
			if err != nil {
				t.Fatal(err)
			}
			got := out.(*slimNode)
			// Labels only when the cache tracks the workload (node constraints match them).
			if withLabels, _ := nodeTransform(res, true)(node); !maps.Equal(withLabels.(*slimNode).labels, node.Labels) || got.labels != nil {
				t.Errorf("labels %v with, %v without tracking; want %v and none", withLabels.(*slimNode).labels, got.labels, node.Labels)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(slimNode{}, objectMeta{}), cmpopts.IgnoreFields(slimNode{}, "invErr", "isoErr")); diff != "" {
				t.Errorf("slim node (-want,+got):\n%s", diff)
			}
			checkErr(t, "inventory", tc.errSub, got.invErr)
			checkErr(t, "isolation", tc.isoErrSub, got.isoErr)

			cp := got.DeepCopyObject().(*slimNode)
			if len(cp.inv.Devices) > 0 {
				cp.inv.Devices[0].Units = 99
				if got.inv.Devices[0].Units == 99 {
					t.Error("DeepCopyObject shares the devices")
				}
			}
		})
	}
}

// setInventory keeps the stored node's sorted devices instead of copying them, and still
// sorts a copy of anything unsorted.
func TestSetInventorySharesSortedDevices(t *testing.T) {
	sorted := []gpushare.Device{{Index: 0, Units: 8}, {Index: 1, Units: 8}}
	n := newNodeState("n")
	n.setInventory(gpushare.Inventory{Devices: sorted}, graceClock{})
	if &n.devices[0] != &sorted[0] {
		t.Error("sorted devices were copied")
	}
	unsorted := []gpushare.Device{{Index: 1, Units: 8}, {Index: 0, Units: 4}}
	n.setInventory(gpushare.Inventory{Devices: unsorted}, graceClock{})
	if n.devices[0].Index != 0 || unsorted[0].Index != 1 {
		t.Errorf("devices %+v (input now %+v): want a sorted copy", n.devices, unsorted)
	}
}

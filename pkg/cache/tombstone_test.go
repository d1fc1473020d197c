package cache

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// TestTombstones feeds the handlers DeletedFinalStateUnknown wrappers, as informers do
// after a missed watch event.
func TestTombstones(t *testing.T) {
	res := gpushare.DefaultResources()
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	c, err := New(Config{Nodes: factory.Core().V1().Nodes().Informer(), Pods: factory.Core().V1().Pods().Informer(), Resources: res})
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		res.Mem: resource.MustParse("16"), res.Count: resource.MustParse("1")}}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1",
			Annotations: map[string]string{gpushare.AnnotationAllocation: `{"0":{"0":4}}`}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{res.Mem: resource.MustParse("4")}}}}},
	}
	c.onNode(node)
	c.onPod(pod)
	if n, _ := c.InspectNode("n1"); n.UsedUnits() != 4 {
		t.Fatalf("used %d, want 4", n.UsedUnits())
	}
	tomb := toolscache.DeletedFinalStateUnknown{Key: "ns/p", Obj: pod}
	if h := c.podHandler().(toolscache.FilteringResourceEventHandler); !h.FilterFunc(tomb) {
		t.Error("pod filter rejects a tombstone of a gpu-mem pod")
	}
	c.onPodDelete(tomb)
	if n, _ := c.InspectNode("n1"); n.UsedUnits() != 0 {
		t.Errorf("used %d after pod tombstone, want 0", n.UsedUnits())
	}
	c.onNodeDelete(toolscache.DeletedFinalStateUnknown{Key: "n1", Obj: node})
	if _, ok := c.InspectNode("n1"); ok {
		t.Error("node still known after node tombstone")
	}
	c.onPodDelete("garbage") // never panics on unexpected objects
	c.onNode(42)
}

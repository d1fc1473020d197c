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
	"github.com/gpushare/gpushare/pkg/policy"
)

// TestTombstones feeds the handlers DeletedFinalStateUnknown wrappers, as informers do
// after a missed watch event. They wrap the stored, transformed objects.
func TestTombstones(t *testing.T) {
	res := gpushare.DefaultResources()
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(Config{Nodes: factory.Core().V1().Nodes().Informer(), Pods: factory.Core().V1().Pods().Informer(),
		PodClient: client.CoreV1(), Resources: res, TrackWorkload: true})
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		res.Mem: resource.MustParse("16"), res.Count: resource.MustParse("1"), corev1.ResourceCPU: resource.MustParse("4")}}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1",
			Annotations: map[string]string{gpushare.AnnotationAllocation: `{"0":{"0":4}}`}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{res.Mem: resource.MustParse("4")},
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
			}}}},
	}
	slimNode, _ := nodeTransform(res, true)(node)
	slimPod, _ := podTransform(res, newConstraintBook())(pod)
	c.onNode(slimNode)
	c.onHostNode(slimNode)
	c.onPod(slimPod)
	c.onHostPod(slimPod)
	if n, _ := c.InspectNode("n1"); n.Used != 4 {
		t.Fatalf("used %d, want 4", n.Used)
	}
	if h, _, _ := c.hosts.free("n1"); h != (policy.Host{CPUMilli: 3000}) {
		t.Fatalf("free host %+v, want 3 cores", h)
	}

	tomb := toolscache.DeletedFinalStateUnknown{Key: "ns/p", Obj: slimPod}
	if h := c.podHandler().(toolscache.FilteringResourceEventHandler); !h.FilterFunc(tomb) {
		t.Error("pod filter rejects a tombstone of a gpu-mem pod")
	}
	c.onPodDelete(tomb)
	c.onHostPodDelete(tomb)
	if n, _ := c.InspectNode("n1"); n.Used != 0 {
		t.Errorf("used %d after pod tombstone, want 0", n.Used)
	}
	if h, _, _ := c.hosts.free("n1"); h != (policy.Host{CPUMilli: 4000}) {
		t.Errorf("free host %+v after pod tombstone, want 4 cores", h)
	}
	nodeTomb := toolscache.DeletedFinalStateUnknown{Key: "n1", Obj: slimNode}
	c.onNodeDelete(nodeTomb)
	c.onHostNodeDelete(nodeTomb)
	if _, ok := c.InspectNode("n1"); ok {
		t.Error("node still known after node tombstone")
	}
	if _, _, ok := c.hosts.free("n1"); ok {
		t.Error("node host still known after node tombstone")
	}

	// Never panics on unexpected objects, on corev1 objects (no longer fed: the transforms
	// turn every one into a slim object), nor on a tombstone without its last object (the
	// informer makes one when its store lost the object).
	empty := toolscache.DeletedFinalStateUnknown{Key: "ns/gone"}
	for _, obj := range []any{"garbage", 42, pod, node, empty} {
		c.onPod(obj)
		c.onPodDelete(obj)
		c.onHostPod(obj)
		c.onHostPodDelete(obj)
		c.onNode(obj)
		c.onNodeDelete(obj)
		c.onHostNode(obj)
		c.onHostNodeDelete(obj)
		if h := c.podHandler().(toolscache.FilteringResourceEventHandler); h.FilterFunc(obj) {
			t.Errorf("pod filter accepts %T", obj)
		}
	}
	if nodes, pods := c.counts(); nodes != 0 || pods != 0 {
		t.Errorf("unexpected objects changed the accounting: %d nodes, %d pods", nodes, pods)
	}
}

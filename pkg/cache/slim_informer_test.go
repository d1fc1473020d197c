package cache

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// The informers the cache is given store only slim objects, keyed as client-go keys them,
// and Cache.Pod finds them.
func TestInformerStoresSlimObjects(t *testing.T) {
	res := gpushare.DefaultResources()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{
		gpushare.AnnotationNodeInventory: `{"unit":"GiB","devices":[{"index":0,"units":16,"healthy":true}]}`}}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1",
			Annotations: map[string]string{gpushare.AnnotationAllocation: `{"0":{"0":4}}`}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Resources: gpuLimits("4", "")}}},
	}
	client := fake.NewClientset(node, pod)
	factory := informers.NewSharedInformerFactory(client, 0)
	nodes, pods := factory.Core().V1().Nodes().Informer(), factory.Core().V1().Pods().Informer()
	c, err := New(Config{Nodes: nodes, Pods: pods, PodClient: client.CoreV1(), Resources: res, TrackWorkload: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	defer func() { cancel(); <-done; factory.Shutdown() }()
	for !c.Ready() {
		if ctx.Err() != nil {
			t.Fatal("cache not ready")
		}
		time.Sleep(time.Millisecond)
	}
	if n, _ := c.InspectNode("n1"); n.Used != 4 || n.Total != 16 {
		t.Errorf("n1 used %d of %d, want 4 of 16", n.Used, n.Total)
	}

	for _, obj := range pods.GetStore().List() {
		if _, ok := obj.(*Pod); !ok {
			t.Errorf("pod store holds %T", obj)
		}
	}
	for _, obj := range nodes.GetStore().List() {
		if _, ok := obj.(*slimNode); !ok {
			t.Errorf("node store holds %T", obj)
		}
	}
	if keys := pods.GetStore().ListKeys(); len(keys) != 1 || keys[0] != "ns/p" {
		t.Errorf("pod store keys %v, want [ns/p]", keys)
	}
	// The factory's pod informer indexes by namespace through meta.Accessor too.
	if objs, err := pods.GetIndexer().ByIndex("namespace", "ns"); err != nil || len(objs) != 1 {
		t.Errorf("namespace index: %d objects, %v", len(objs), err)
	}
	got, ok := c.Pod("ns", "p")
	if !ok {
		t.Fatal("Cache.Pod does not find ns/p")
	}
	if m, err := meta.Accessor(got); err != nil || m.GetUID() != "u1" {
		t.Errorf("meta.Accessor: %v, %v", m, err)
	}
	if _, ok := c.Pod("ns", "missing"); ok {
		t.Error("Cache.Pod finds a pod that does not exist")
	}

	// An update without anything the cache reads still arrives and changes nothing; a delete
	// empties the node.
	pod.Labels = map[string]string{"touched": "yes"}
	if _, err := client.CoreV1().Pods("ns").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Pods("ns").Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		if n, _ := c.InspectNode("n1"); n.Used == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("pod delete never reached the cache")
		}
		time.Sleep(time.Millisecond)
	}
	if _, ok := c.Pod("ns", "p"); ok {
		t.Error("Cache.Pod still finds the deleted pod")
	}
}

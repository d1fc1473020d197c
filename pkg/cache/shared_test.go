package cache_test

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gpushare/gpushare/pkg/cache"
	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// TestSharedInformers runs the cache on informers whose owner reads full objects (the
// scheduler's, for the framework plugin): the stores keep *corev1.Pod and *corev1.Node, the
// ledger is the same as on its own informers, and nodes come and go with the selector.
func TestSharedInformers(t *testing.T) {
	gpuNode := func(name string, labelled bool, cards ...int64) *corev1.Node {
		n := ct.Node(name, cards...)
		if !labelled {
			delete(n.Labels, gpushare.NodeLabelKey)
		}
		return n
	}
	placed := ct.Placed(ct.Pod("p", 6), "n1", gpushare.CardUnits{1: 6})
	for _, track := range []bool{false, true} {
		env := ct.StartWith(t, ct.Options{Shared: true, Track: track,
			NodeSelector: labels.SelectorFromSet(labels.Set{gpushare.NodeLabelKey: gpushare.NodeLabelValue})},
			gpuNode("n1", true, 16, 16), gpuNode("plain", false, 16), placed)
		ctx := context.Background()

		if got, want := cards(env.Cache, "n1"), "0:0/16 1:6/16"; got != want {
			t.Fatalf("track=%v: n1 cards %q, want %q", track, got, want)
		}
		if got := cards(env.Cache, "plain"); got != "" {
			t.Fatalf("track=%v: a node outside the selector is accounted: %q", track, got)
		}
		// The owner's listers still work: the stores hold full objects.
		if _, err := env.Factory.Core().V1().Pods().Lister().Pods("default").Get("p"); err != nil {
			t.Fatalf("track=%v: pod lister: %v", track, err)
		}
		if _, err := env.Factory.Core().V1().Nodes().Lister().Get("n1"); err != nil {
			t.Fatalf("track=%v: node lister: %v", track, err)
		}
		if p, ok := env.Cache.Pod("default", "p"); !ok || p.GetName() != "p" {
			t.Fatalf("track=%v: Cache.Pod = %v, %v; want the pod", track, p, ok)
		}

		if obj, err := env.Factory.Core().V1().Nodes().Lister().Get("plain"); err != nil ||
			!errors.Is(env.Cache.FitsNode(obj, request(t, ct.Pod("q", 1)), binpack(t)), cache.ErrUnknownNode) {
			t.Fatalf("track=%v: a node outside the selector fits by its object (lister err %v)", track, err)
		}

		// Labelling a node adds it; removing the label removes it.
		plain, _ := env.Client.CoreV1().Nodes().Get(ctx, "plain", metav1.GetOptions{})
		plain.Labels[gpushare.NodeLabelKey] = gpushare.NodeLabelValue
		if _, err := env.Client.CoreV1().Nodes().Update(ctx, plain, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		ct.Eventually(t, "labelled node accounted", func() bool { return cards(env.Cache, "plain") == "0:0/16" })
		// FitsNode finds the informer's objects by address, and other objects by name.
		lister := env.Factory.Core().V1().Nodes().Lister()
		one := request(t, ct.Pod("q", 1))
		ct.Eventually(t, "labelled node fits by its object", func() bool {
			obj, err := lister.Get("plain")
			return err == nil && env.Cache.FitsNode(obj, one, binpack(t)) == nil
		})
		if err := env.Cache.FitsNode(gpuNode("plain", true), one, binpack(t)); err != nil {
			t.Fatalf("track=%v: FitsNode of a copy: %v", track, err)
		}
		if err := env.Cache.FitsNode(gpuNode("nowhere", true), one, binpack(t)); !errors.Is(err, cache.ErrUnknownNode) {
			t.Fatalf("track=%v: FitsNode of an unknown node: %v, want ErrUnknownNode", track, err)
		}
		n1, _ := env.Client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		delete(n1.Labels, gpushare.NodeLabelKey)
		if _, err := env.Client.CoreV1().Nodes().Update(ctx, n1, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		ct.Eventually(t, "unlabelled node's cards forgotten", func() bool {
			obj, err := lister.Get("n1")
			return err == nil && obj.Labels[gpushare.NodeLabelKey] == "" && errors.Is(env.Cache.FitsNode(obj, one, binpack(t)), cache.ErrUnknownNode) &&
				env.Cache.Fits("n1", one, binpack(t)) != nil
		})

		// Pods leave as on the cache's own informers.
		if err := env.Client.CoreV1().Pods("default").Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		ct.Eventually(t, "deleted pod forgotten", func() bool { _, ok := env.Cache.Pod("default", "p"); return !ok })
	}
}

// TestSharedViewNodesConstraints: on the plugin's path (shared informers, nodes by their
// objects) a node shows the pods' node constraints it fails, as on the extender's.
func TestSharedViewNodesConstraints(t *testing.T) {
	labelled := func(n *corev1.Node, product string) *corev1.Node {
		n.Labels["product"] = product
		return n
	}
	a := ct.Pod("a", 4)
	a.Spec.NodeSelector = map[string]string{"product": "T4"}
	env := ct.StartWith(t, ct.Options{Shared: true, Track: true},
		labelled(ct.Node("t4", 16), "T4"), labelled(ct.Node("v100", 16), "V100"), a)
	lister := env.Factory.Core().V1().Nodes().Lister()
	var objs []*corev1.Node
	for _, name := range []string{"t4", "v100"} {
		n, err := lister.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, n)
	}
	ct.Eventually(t, "v100 fails a's node selector, t4 does not", func() bool {
		got := make([]bool, 2)
		env.Cache.ViewNodes(objs, gpushare.PodRequest{}, func(i int, n policy.Node) { got[i] = n.Unmet.Has(1) })
		return !got[0] && got[1]
	})
}

// TestSharedViewNodesHost: on the plugin's path the index keeps each node's host book entry,
// so ViewNodes reads the free CPU by the node object; the entry follows pods as they come
// and go, and a node deleted and created again is read from its new entry.
func TestSharedViewNodesHost(t *testing.T) {
	withCPU := func(n *corev1.Node, cores int64) *corev1.Node {
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(cores, resource.DecimalSI)}
		return n
	}
	env := ct.StartWith(t, ct.Options{Shared: true, Track: true}, withCPU(ct.Node("n1", 16), 8))
	ctx := context.Background()
	lister := env.Factory.Core().V1().Nodes().Lister()
	freeCPU := func(obj *corev1.Node) (int64, bool) {
		var cpu int64
		var known bool
		env.Cache.ViewNodes([]*corev1.Node{obj}, gpushare.PodRequest{}, func(_ int, n policy.Node) {
			if n.Host != nil {
				cpu, known = n.Host.CPUMilli, true
			}
		})
		return cpu, known
	}
	// current is n1's free CPU read through the informer's object of the moment.
	current := func(want int64) func() bool {
		return func() bool {
			obj, err := lister.Get("n1")
			if err != nil {
				return false
			}
			cpu, ok := freeCPU(obj)
			return ok && cpu == want
		}
	}
	obj, err := lister.Get("n1")
	if err != nil {
		t.Fatal(err)
	}
	ct.Eventually(t, "n1's 8 cores free", func() bool { cpu, ok := freeCPU(obj); return ok && cpu == 8000 })

	p := ct.Placed(ct.Pod("p", 4), "n1", gpushare.CardUnits{0: 4})
	p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}
	if _, err := env.Client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ct.Eventually(t, "a pod of 3 cores counted on the same object", func() bool { cpu, ok := freeCPU(obj); return ok && cpu == 5000 })

	// Deleted (the pod still holds CPU there, so the book keeps the entry) and created again.
	if err := env.Client.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ct.Eventually(t, "the deleted node's old object reads no host", func() bool { _, ok := freeCPU(obj); return !ok })
	if _, err := env.Client.CoreV1().Nodes().Create(ctx, withCPU(ct.Node("n1", 16), 16), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ct.Eventually(t, "the new object reads 16 cores less the pod's 3", current(13000))
	// The pod leaves: the entry follows.
	if err := env.Client.CoreV1().Pods("default").Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ct.Eventually(t, "all 16 cores free", current(16000))
}

package cache_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/cache"
	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// withHost gives a node allocatable CPU (cores) and memory (GiB).
func withHost(n *corev1.Node, cores, gib int64) *corev1.Node {
	if n.Status.Allocatable == nil {
		n.Status.Allocatable = corev1.ResourceList{}
	}
	n.Status.Allocatable[corev1.ResourceCPU] = *resource.NewQuantity(cores, resource.DecimalSI)
	n.Status.Allocatable[corev1.ResourceMemory] = *resource.NewQuantity(gib<<30, resource.BinarySI)
	return n
}

// requesting sets the pod's first container's CPU (millicores) and memory (MiB) requests.
func requesting(p *corev1.Pod, milli, mib int64) *corev1.Pod {
	c := &p.Spec.Containers[0]
	if c.Resources.Requests == nil {
		c.Resources.Requests = corev1.ResourceList{}
	}
	c.Resources.Requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(milli, resource.DecimalSI)
	c.Resources.Requests[corev1.ResourceMemory] = *resource.NewQuantity(mib<<20, resource.BinarySI)
	return p
}

func fgd(t *testing.T) policy.Policy {
	t.Helper()
	p, err := policy.New("fgd")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// views copies what ViewEach shows of each named node (its cards and host are the cache's
// own, valid only during the visit).
func views(c *cache.Cache, names ...string) []policy.Node {
	out := make([]policy.Node, len(names))
	c.ViewEach(names, nil, func(i int, n policy.Node) {
		out[i] = policy.Node{Name: n.Name, Cards: append([]policy.Card(nil), n.Cards...)}
		if n.Host != nil {
			h := *n.Host
			out[i].Host = &h
		}
	})
	return out
}

func TestViewEachHostAccounting(t *testing.T) {
	// n1: 16 cores, 64 GiB. Bound there: a gpu pod (2 cores, 1 GiB) and a pod without gpu-mem
	// (4 cores, 2 GiB) → free 10 cores, 61 GiB. A Succeeded pod and an unbound pod count
	// nothing.
	done := requesting(ct.Pod("done", 0), 8000, 1024)
	done.Spec.NodeName, done.Status.Phase = "n1", corev1.PodSucceeded
	e := ct.StartTracking(t,
		withHost(ct.Node("n1", 16, 16), 16, 64),
		requesting(ct.Placed(ct.Pod("gpu", 4), "n1", gpushare.CardUnits{0: 4}), 2000, 1024),
		func() *corev1.Pod { p := requesting(ct.Pod("cpu", 0), 4000, 2048); p.Spec.NodeName = "n1"; return p }(),
		done,
		requesting(ct.Pod("pending", 0), 1000, 1024),
	)
	want := []policy.Node{
		{
			Name:  "n1",
			Cards: []policy.Card{{Index: 0, Total: 16, Used: 4, Healthy: true}, {Index: 1, Total: 16, Healthy: true}},
			Host:  &policy.Host{CPUMilli: 10000, MemoryMiB: 61 * 1024},
		},
		{Name: "missing"}, // neither cards nor host known
	}
	if diff := cmp.Diff(want, views(e.Cache, "n1", "missing")); diff != "" {
		t.Errorf("views (-want,+got):\n%s", diff)
	}

	// Deleting the pod without gpu-mem gives its CPU back.
	if err := e.Client.CoreV1().Pods("default").Delete(context.Background(), "cpu", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ct.Eventually(t, "cpu pod's CPU returned", func() bool {
		n := views(e.Cache, "n1")[0]
		return n.Host != nil && n.Host.CPUMilli == 14000
	})
}

// TestPodWithoutGPUFitsEveryNode: on the prioritize path (ViewEach and a Scorer), a pod
// without gpu-mem fits GPU nodes and nodes the cache does not know alike.
func TestPodWithoutGPUFitsEveryNode(t *testing.T) {
	e := ct.StartTracking(t, ct.Node("n1", 16))
	sc := policy.NewScorer(e.Cache.ForPod(fgd(t)), gpushare.PodRequest{}, policy.Host{CPUMilli: 100})
	fits := make([]bool, 2)
	e.Cache.ViewEach([]string{"n1", "not-a-gpu-node"}, nil, func(i int, n policy.Node) { _, fits[i] = sc.Score(n) })
	if diff := cmp.Diff([]bool{true, true}, fits); diff != "" {
		t.Errorf("fits (-want,+got):\n%s", diff)
	}
}

func TestForPodLearnsTheWorkload(t *testing.T) {
	// Three pods of 4 units (1 core) and one of 8 units (2 cores), each counted once however
	// often it is updated.
	e := ct.StartTracking(t, ct.Node("n1", 16, 16),
		requesting(ct.Pod("a", 4), 1000, 512), requesting(ct.Pod("b", 4), 1000, 512),
		requesting(ct.Pod("c", 4), 1000, 512), requesting(ct.Pod("d", 8), 2000, 512))
	p, err := e.Client.CoreV1().Pods("default").Get(context.Background(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Labels = map[string]string{"touched": "yes"}
	if _, err := e.Client.CoreV1().Pods("default").Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := policy.Workload{
		{Cards: 1, PerCard: 4, Host: policy.Host{CPUMilli: 1000, MemoryMiB: 512}, Weight: 0.75},
		{Cards: 1, PerCard: 8, Host: policy.Host{CPUMilli: 2000, MemoryMiB: 512}, Weight: 0.25},
	}
	// The learned workload is only visible through the policy's decisions: compare with a
	// policy built from the expected workload, on cards where fgd and best fit disagree.
	// Free 6 and 16, a 4-unit pod: on card0 it leaves 2 and 16 → F = 2 (2 unusable for both
	// shapes); on card1 it leaves 6 and 12 → F = 0.25·6 = 1.5 (6 only misses the 8s).
	// fgd takes card1; best fit (and fgd without a workload) takes card0.
	node := policy.Node{Cards: []policy.Card{{Index: 0, Total: 16, Used: 10, Healthy: true}, {Index: 1, Total: 16, Healthy: true}}}
	req := gpushare.PodRequest{Containers: []gpushare.ContainerRequest{{Kind: gpushare.App, Units: 4, Cards: 1}}}
	ct.Eventually(t, "workload learned", func() bool {
		got, err1 := e.Cache.ForPod(fgd(t)).Place(node, req)
		exp, err2 := fgd(t).(policy.WorkloadAware).WithWorkload(want, policy.Capacity{}).Place(node, req)
		return err1 == nil && err2 == nil && cmp.Equal(exp.Usage, got.Usage) && got.Usage[1] == 4
	})
	if bp := binpack(t); e.Cache.ForPod(bp) != bp {
		t.Error("ForPod changed a policy that is not workload-aware")
	}
}

func TestForPodNodeConstraints(t *testing.T) {
	// t4 and v100, two cards of 16 units each (16 cores, 64 GiB), labelled with their product. a (4 units) may
	// run on T4 only (required node affinity), b (4 units) anywhere. v100 fails a's
	// constraint (1), t4 none. Free: 64 units, 32 of them on nodes meeting constraint 1: a's
	// shape weighs 0.5 × 64/32 = 1, b's 0.5.
	labelled := func(n *corev1.Node, product string) *corev1.Node {
		n.Labels["product"] = product
		return n
	}
	a := requesting(ct.Pod("a", 4), 1000, 512)
	a.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "product", Operator: corev1.NodeSelectorOpIn, Values: []string{"T4"}}},
		}}},
	}}
	e := ct.StartTracking(t, withHost(labelled(ct.Node("t4", 16, 16), "T4"), 16, 64), withHost(labelled(ct.Node("v100", 16, 16), "V100"), 16, 64),
		a, requesting(ct.Pod("b", 4), 1000, 512))
	host := policy.Host{CPUMilli: 1000, MemoryMiB: 512}
	want := policy.Workload{
		{Cards: 1, PerCard: 4, Host: host, Weight: 0.5},
		{Cards: 1, PerCard: 4, Host: host, Constraint: 1, Weight: 1},
	}
	unmet := func() []bool {
		out := make([]bool, 2)
		e.Cache.ViewEach([]string{"t4", "v100"}, nil, func(i int, n policy.Node) { out[i] = n.Unmet.Has(1) })
		return out
	}
	ct.Eventually(t, "v100 fails a's constraint", func() bool { return cmp.Equal([]bool{false, true}, unmet()) })
	// The workload is only visible through the policy's rates: ForPod's must equal those of
	// a policy built from the expected workload, node for node. For b on v100: F drops by
	// a's weight × 4 (a can use nothing there), so b rates higher on v100 than on t4.
	req := gpushare.PodRequest{Containers: []gpushare.ContainerRequest{{Kind: gpushare.App, Units: 4, Cards: 1}}}
	rates := func(pol policy.Policy) []float64 {
		sc := policy.NewScorer(pol, req, host)
		out := make([]float64, 2)
		e.Cache.ViewEach([]string{"t4", "v100"}, nil, func(i int, n policy.Node) { out[i], _ = sc.Score(n) })
		return out
	}
	ct.Eventually(t, "workload learned with its constraint and scarcity", func() bool {
		got, exp := rates(e.Cache.ForPod(fgd(t))), rates(fgd(t).(policy.WorkloadAware).WithWorkload(want, e.Cache.Capacity()))
		return cmp.Equal(exp, got) && got[1] > got[0]
	})
}

func TestCapacityFollowsNodes(t *testing.T) {
	a := withHost(ct.Node("a", 16, 16), 16, 64)
	b := withHost(ct.Node("b", 8), 8, 32)
	e := ct.StartTracking(t, a, b)
	want := func(units, cores, gib int64) policy.Capacity {
		return policy.Capacity{Units: units, Host: policy.Host{CPUMilli: cores * 1000, MemoryMiB: gib << 10}}
	}
	ct.Eventually(t, "both nodes counted", func() bool { return e.Cache.Capacity() == want(40, 24, 96) })

	// a grows to 32 cores and loses a card to a health check; b leaves.
	grown := withHost(ct.NodeWith("a",
		gpushare.Device{Index: 0, UUID: "GPU-a-0", Model: "Tesla T4", Units: 16, Healthy: true},
		gpushare.Device{Index: 1, UUID: "GPU-a-1", Model: "Tesla T4", Units: 16, Healthy: false}), 32, 64)
	ctx := context.Background()
	if _, err := e.Client.CoreV1().Nodes().Update(ctx, grown, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ct.Eventually(t, "a's new allocatable and healthy cards", func() bool { return e.Cache.Capacity() == want(24, 40, 96) })
	if err := e.Client.CoreV1().Nodes().Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ct.Eventually(t, "b gone", func() bool { return e.Cache.Capacity() == want(16, 32, 64) })
}

// TestForPodGivesCapacity: ForPod hands fgd the known nodes' capacity, on which its host
// cap depends: rates on a node with little free CPU are those of a policy built with the
// cache's Capacity, and differ from those of one built without.
func TestForPodGivesCapacity(t *testing.T) {
	// Learned: three pods of 4 units and 1 core, one of 8 units and 2 cores (250 millicores a
	// unit). n1: 32 units, 16 cores: host pressure 0.5, so fgd feeds every shape at the
	// average; without a capacity, at each shape's own requests.
	e := ct.StartTracking(t, withHost(ct.Node("n1", 16, 16), 16, 64),
		requesting(ct.Pod("a", 4), 1000, 512), requesting(ct.Pod("b", 4), 1000, 512),
		requesting(ct.Pod("c", 4), 1000, 512), requesting(ct.Pod("d", 8), 2000, 512))
	want := policy.Workload{
		{Cards: 1, PerCard: 4, Host: policy.Host{CPUMilli: 1000, MemoryMiB: 512}, Weight: 0.75},
		{Cards: 1, PerCard: 8, Host: policy.Host{CPUMilli: 2000, MemoryMiB: 512}, Weight: 0.25},
	}
	// 3 free cores under two empty cards: the average feeds 12 units, the 8-unit shape's own
	// pods 8.
	node := policy.Node{Cards: []policy.Card{{Index: 0, Total: 16, Healthy: true}, {Index: 1, Total: 16, Healthy: true}},
		Host: &policy.Host{CPUMilli: 3000, MemoryMiB: 1 << 20}}
	req := gpushare.PodRequest{Containers: []gpushare.ContainerRequest{{Kind: gpushare.App, Units: 4, Cards: 1}}}
	rate := func(pol policy.Policy) float64 {
		r, _ := policy.NewScorer(pol, req, policy.Host{CPUMilli: 1000, MemoryMiB: 512}).Score(node)
		return r
	}
	wa := fgd(t).(policy.WorkloadAware)
	ct.Eventually(t, "workload and capacity learned", func() bool {
		return e.Cache.Capacity().Units == 32 && rate(e.Cache.ForPod(fgd(t))) == rate(wa.WithWorkload(want, e.Cache.Capacity()))
	})
	if rate(wa.WithWorkload(want, e.Cache.Capacity())) == rate(wa.WithWorkload(want, policy.Capacity{})) {
		t.Fatal("the capacity changes no rate here: the test shows nothing")
	}
}

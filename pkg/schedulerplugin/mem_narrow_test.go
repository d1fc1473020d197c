package schedulerplugin

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// memCluster is n nodes of one 16 GiB card, node i with i%15 GiB taken (n00 empty, n14 at
// 14 GiB), plus "full" with nothing free; infos lists them all, as PreFilter gets them.
func memCluster(n int) ([]runtime.Object, []fwk.NodeInfo) {
	objs := []runtime.Object{ct.Node("full", 16), ct.Placed(ct.Pod("on-full", 16), "full", gpushare.CardUnits{0: 16})}
	infos := []fwk.NodeInfo{nodeInfo("full")}
	for i := range n {
		name := fmt.Sprintf("n%02d", i)
		objs = append(objs, ct.Node(name, 16))
		if used := int64(i % 15); used > 0 {
			objs = append(objs, ct.Placed(ct.Pod("on-"+name, used), name, gpushare.CardUnits{0: used}))
		}
		infos = append(infos, nodeInfo(name))
	}
	return objs, infos
}

// TestMemNarrowsToBest: under fgd and binpack a gpu-mem pod's PreFilter keeps the
// narrowNodes nodes the policy rates best, the best of all among them, and no node its cards
// cannot hold; under spread, with memNarrowing off, or with no more nodes than narrowNodes it
// keeps every node.
func TestMemNarrowsToBest(t *testing.T) {
	const many = narrowNodes + 13
	for _, tc := range []struct {
		name  string
		args  *GPUShareArgs
		nodes int
		want  int // 0: no narrowing
	}{
		{"binpack", &GPUShareArgs{Policy: "binpack"}, many, narrowNodes},
		{"fgd", &GPUShareArgs{Policy: "fgd"}, many, narrowNodes},
		{"spread", &GPUShareArgs{Policy: "spread"}, many, 0},
		{"off", &GPUShareArgs{Policy: "binpack", MemNarrowing: ptr.To(false)}, many, 0},
		{"few nodes", &GPUShareArgs{Policy: "binpack"}, narrowNodes - 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, infos := memCluster(tc.nodes)
			f := start(t, tc.args, objs...)
			pod := ct.Pod("nb", 2)
			res, status := f.pl.PreFilter(context.Background(), newState(), pod, infos)
			if !status.IsSuccess() {
				t.Fatal(status)
			}
			if tc.want == 0 {
				if res != nil {
					t.Errorf("PreFilter narrowed to %v, want every node", sets.List(res.NodeNames))
				}
				return
			}
			if res == nil || res.NodeNames.Len() != tc.want {
				t.Fatalf("PreFilter = %v, want %d nodes", res, tc.want)
			}
			if res.NodeNames.Has("full") {
				t.Error("narrowed to a node whose card cannot hold the pod")
			}
			// The policy's own ranking of every node, as the extender's prioritize computes it:
			// the nodes kept are its best, the top one among them.
			req, _ := f.pl.res.PodRequest(pod)
			sc := policy.NewScorer(f.pl.cache.ForPod(f.pl.pol), req, policy.Host{})
			names := make([]string, len(infos))
			for i, n := range infos {
				names[i] = n.Node().Name
			}
			rates, fits := make([]float64, len(names)), make([]bool, len(names))
			f.pl.cache.ViewEach(names, nil, func(i int, node policy.Node) { rates[i], fits[i] = sc.Score(node) })
			lowestKept, bestLeft := 1e300, -1e300
			for i, n := range names {
				switch {
				case res.NodeNames.Has(n):
					lowestKept = min(lowestKept, rates[i])
				case fits[i]:
					bestLeft = max(bestLeft, rates[i])
				}
			}
			if bestLeft > lowestKept {
				t.Errorf("a node left out rates %v, above a node kept (%v)", bestLeft, lowestKept)
			}
			if tc.args.Policy == "binpack" && (!res.NodeNames.Has("n14") || res.NodeNames.Has("n00")) {
				t.Errorf("binpack kept %v: want n14 (14 GiB taken) in, n00 (empty) out", sets.List(res.NodeNames))
			}
		})
	}
}

// TestMemNarrowFallsBack: every node is filtered for a pod no card holds, for a pod narrowed
// before and not placed since, for a pod with its own card choice, and for a pod whose earlier
// bind may land (its node only); Reserve ends the fallback.
func TestMemNarrowFallsBack(t *testing.T) {
	objs, infos := memCluster(narrowNodes + 13)
	f := start(t, &GPUShareArgs{Policy: "binpack"}, objs...)
	ctx := context.Background()

	if res, status := f.pl.PreFilter(ctx, newState(), ct.Pod("huge", 17), infos); !status.IsSuccess() || res != nil {
		t.Errorf("PreFilter of a pod no card holds = %v, %v; want every node", res, status)
	}
	pod := ct.Pod("nb", 2)
	if res, status := f.pl.PreFilter(ctx, newState(), pod, infos); !status.IsSuccess() || res == nil {
		t.Fatalf("first PreFilter = %v, %v; want narrowed", res, status)
	}
	st := newState()
	if res, status := f.pl.PreFilter(ctx, st, pod, infos); !status.IsSuccess() || res != nil {
		t.Errorf("retry's PreFilter = %v, %v; want every node", res, status)
	}
	if s := f.pl.Reserve(ctx, st, pod, "n03"); !s.IsSuccess() {
		t.Fatal(s)
	}
	f.pl.Unreserve(ctx, st, pod, "n03")
	if res, status := f.pl.PreFilter(ctx, newState(), pod, infos); !status.IsSuccess() || res == nil {
		t.Errorf("PreFilter after Reserve = %v, %v; want narrowed again", res, status)
	}

	chooser := ct.Pod("chooser", 2)
	chooser.Annotations = map[string]string{gpushare.AnnotationCardPolicy: "binpack"}
	if res, status := f.pl.PreFilter(ctx, newState(), chooser, infos); !status.IsSuccess() || res != nil {
		t.Errorf("PreFilter of a pod with its own card choice = %v, %v; want every node", res, status)
	}
}

// TestMemNarrowAdmission: nodes kube-scheduler's own filters would refuse (cordoned, an
// untolerated taint, another node pool, no CPU or pod slot left) are not kept, however well
// the policy rates them; a pod with constraints GPUShare does not read keeps every node.
func TestMemNarrowAdmission(t *testing.T) {
	objs, infos := memCluster(narrowNodes + 13)
	f := start(t, &GPUShareArgs{Policy: "binpack"}, objs...)
	ctx := context.Background()
	refused := map[string]func(n testNodeInfo) testNodeInfo{
		"n14": func(n testNodeInfo) testNodeInfo { n.node.Spec.Unschedulable = true; return n },
		"n13": func(n testNodeInfo) testNodeInfo {
			n.node.Spec.Taints = []v1.Taint{{Key: "team", Value: "a", Effect: v1.TaintEffectNoSchedule}}
			return n
		},
		"n12": func(n testNodeInfo) testNodeInfo { n.node.Labels = map[string]string{"pool": "b"}; return n },
		"n11": func(n testNodeInfo) testNodeInfo { n.used.milliCPU = n.alloc.milliCPU - 500; return n },
		"n10": func(n testNodeInfo) testNodeInfo { n.pods = n.alloc.podNumber; return n },
	}
	for i, info := range infos {
		n := info.(testNodeInfo)
		node := n.node.DeepCopy()
		node.Labels = map[string]string{"pool": "a"}
		n = n.withNode(node)
		if change, ok := refused[node.Name]; ok {
			n = change(n)
		}
		infos[i] = n
	}
	pod := ct.Pod("nb", 2)
	pod.Spec.NodeSelector = map[string]string{"pool": "a"}
	pod.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi")}
	res, status := f.pl.PreFilter(ctx, newState(), pod, infos)
	if !status.IsSuccess() || res == nil || res.NodeNames.Len() != narrowNodes {
		t.Fatalf("PreFilter = %v, %v; want %d nodes", res, status, narrowNodes)
	}
	for n := range refused {
		if res.NodeNames.Has(n) {
			t.Errorf("kept %s, which kube-scheduler would refuse", n)
		}
	}
	if !res.NodeNames.Has("n29") || !res.NodeNames.Has("n09") {
		t.Errorf("kept %v: want n29 (14 GiB taken) and n09 (9 GiB) in", sets.List(res.NodeNames))
	}

	tolerating := pod.DeepCopy()
	tolerating.Name, tolerating.UID = "tolerating", "uid-tolerating"
	tolerating.Spec.Tolerations = []v1.Toleration{{Key: "team", Operator: v1.TolerationOpEqual, Value: "a", Effect: v1.TaintEffectNoSchedule}}
	if res, status := f.pl.PreFilter(ctx, newState(), tolerating, infos); !status.IsSuccess() || res == nil || !res.NodeNames.Has("n13") {
		t.Errorf("PreFilter of a pod tolerating n13's taint = %v, %v; want n13 kept", res, status)
	}

	for name, change := range map[string]func(*v1.Pod){
		"pvc": func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "home", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "home"}}}}
		},
		"host port": func(p *v1.Pod) { p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080}} },
		"anti-affinity": func(p *v1.Pod) {
			p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{TopologyKey: "kubernetes.io/hostname"}}}}
		},
		"may preempt": func(p *v1.Pod) { p.Spec.Priority = ptr.To[int32](1000) },
		"spread": func(p *v1.Pod) {
			p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: v1.DoNotSchedule}}
		},
	} {
		p := pod.DeepCopy()
		p.Name, p.UID = name, types.UID("uid-"+name)
		change(p)
		if res, status := f.pl.PreFilter(ctx, newState(), p, infos); !status.IsSuccess() || res != nil {
			t.Errorf("%s: PreFilter = %v, %v; want every node", name, res, status)
		}
	}
}

// TestPostFilterRetriesNarrowed: a cycle PreFilter narrowed and no node took asks the queue
// to retry the pod (Activate); its retry, over every node, does not ask again, nor does a
// pod never narrowed.
func TestPostFilterRetriesNarrowed(t *testing.T) {
	objs, infos := memCluster(narrowNodes + 13)
	f := start(t, &GPUShareArgs{Policy: "binpack"}, objs...)
	ctx := context.Background()
	pod := ct.Pod("nb", 2)
	cycle := func() *fwk.Status {
		st := newState()
		if _, status := f.pl.PreFilter(ctx, st, pod, infos); !status.IsSuccess() {
			t.Fatal(status)
		}
		_, status := f.pl.PostFilter(ctx, st, pod, nil)
		return status
	}
	if s := cycle(); s.Code() != fwk.Unschedulable || len(f.h.activated) != 1 || f.h.activated[0] != "default/nb" {
		t.Fatalf("narrowed cycle: PostFilter = %v, activated %v; want Unschedulable and default/nb activated", s, f.h.activated)
	}
	if s := cycle(); s.Code() != fwk.Unschedulable || len(f.h.activated) != 1 {
		t.Errorf("retry over every node: PostFilter = %v, activated %v; want no second activation", s, f.h.activated)
	}
	other := ct.Pod("other", 2)
	other.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080}} // never narrowed
	st := newState()
	if _, status := f.pl.PreFilter(ctx, st, other, infos); !status.IsSuccess() {
		t.Fatal(status)
	}
	if _, s := f.pl.PostFilter(ctx, st, other, nil); s.Code() != fwk.Unschedulable || len(f.h.activated) != 1 {
		t.Errorf("pod never narrowed: PostFilter = %v, activated %v; want no activation", s, f.h.activated)
	}
	for outcome, want := range map[string]float64{outcomeNarrowed: 1, outcomeRetried: 1} {
		if got := testutil.ToFloat64(f.pl.narrowings.WithLabelValues(narrowedGPUMem, outcome)); got != want {
			t.Errorf("gpushare_scheduler_narrowed_pods_total{request=gpu-mem,outcome=%s} = %v, want %v", outcome, got, want)
		}
	}
}

// BenchmarkPreFilterGPUMemPod is PreFilter under fgd for a 4-unit gpu-mem pod given 5000
// nodes of eight 16-unit cards holding 10,000 pods: rating every node and keeping the
// narrowNodes best-rated that pass admission (narrowMem), the work that spares the other
// plugins' Filter and Score on the rest.
func BenchmarkPreFilterGPUMemPod(b *testing.B) {
	var objs []runtime.Object
	var infos []fwk.NodeInfo
	for i := range benchNodes {
		name := fmt.Sprintf("n%04d", i)
		objs = append(objs, ct.Node(name, 16, 16, 16, 16, 16, 16, 16, 16))
		infos = append(infos, nodeInfo(name))
	}
	for i := range benchClaims {
		node := fmt.Sprintf("n%04d", i%benchNodes)
		objs = append(objs, ct.Placed(ct.Pod(fmt.Sprintf("p%d", i), int64(1+i%3)), node, gpushare.CardUnits{i % 8: int64(1 + i%3)}))
	}
	f := start(b, &GPUShareArgs{Policy: "fgd"}, objs...)
	ctx := context.Background()
	pod := ct.Pod("nb", 4)
	b.ReportAllocs()
	begin := processCPU(b)
	for b.Loop() {
		f.pl.narrowed.forget(pod.UID)
		res, s := f.pl.PreFilter(ctx, newState(), pod, infos)
		if !s.IsSuccess() || res == nil || res.NodeNames.Len() != narrowNodes {
			b.Fatalf("PreFilter = %v, %v", res, s)
		}
	}
	b.ReportMetric(float64(processCPU(b)-begin)/float64(b.N), "cpu-ns/op")
}

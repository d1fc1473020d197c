package schedulerplugin

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/gpushare"
)

// narrowCluster is DRA nodes of two 16 GiB cards, node name → GiB taken on card 0 (16:
// both cards full), a node without a gpushare slice ("cpu"), and the pending 4 GiB claim
// "notebook". It returns the DRA manager, the objects and the NodeInfos of every node.
func narrowCluster(t *testing.T, used map[string]int) (*fakeDRA, []runtime.Object, []fwk.NodeInfo) {
	d := &fakeDRA{claims: []*resourceapi.ResourceClaim{pending("notebook", ask("4Gi", 1))}}
	objs := []runtime.Object{ct.BareNode("cpu")}
	infos := []fwk.NodeInfo{nodeInfo("cpu")}
	for _, node := range slices.Sorted(maps.Keys(used)) {
		d.slices = append(d.slices, draSlice(t, node, gpushare.GiB, []int64{16, 16}))
		objs = append(objs, ct.BareNode(node))
		infos = append(infos, nodeInfo(node))
		switch u := used[node]; {
		case u >= 16:
			d.claims = append(d.claims, allocated("full-"+node, held{node, "gpu-0", "16Gi"}, held{node, "gpu-1", "16Gi"}))
		case u > 0:
			d.claims = append(d.claims, allocated("c-"+node, held{node, "gpu-0", fmt.Sprintf("%dGi", u)}))
		}
	}
	return d, objs, infos
}

// TestDRANarrowsToFittingNodes: PreFilter restricts a claim pod to the DRA nodes whose cards
// hold its claim, every one of them while they are few, and Filter passes it there.
func TestDRANarrowsToFittingNodes(t *testing.T) {
	for _, pol := range []string{"binpack", "fgd", "spread"} {
		t.Run(pol, func(t *testing.T) {
			d, objs, infos := narrowCluster(t, map[string]int{"full": 16, "a": 14, "b": 0})
			f := startWithDRA(t, &GPUShareArgs{Policy: pol}, d, objs...)
			pod := claimPod("nb", "notebook")
			st := newState()
			res, status := f.pl.PreFilter(context.Background(), st, pod, infos)
			if !status.IsSuccess() || res == nil {
				t.Fatalf("PreFilter = %v, %v; want the fitting nodes", res, status)
			}
			if want := sets.New("a", "b"); !res.NodeNames.Equal(want) {
				t.Errorf("narrowed to %v, want %v", sets.List(res.NodeNames), sets.List(want))
			}
			if s := f.pl.Filter(context.Background(), st, pod, nodeInfo("a")); !s.IsSuccess() {
				t.Errorf("Filter of a claim pod = %v, want success (DynamicResources decides)", s)
			}
		})
	}
}

// TestDRANarrowsToBest: under binpack, of many fitting nodes the narrowNodes fullest
// are kept; under spread every fitting node.
func TestDRANarrowsToBest(t *testing.T) {
	used := map[string]int{}
	for i := range narrowNodes + 8 {
		used[fmt.Sprintf("n%02d", i)] = i % 13 // 0-12 GiB taken: 4 GiB fits everywhere
	}
	for _, tc := range []struct {
		pol  string
		want int
	}{{"binpack", narrowNodes}, {"spread", narrowNodes + 8}} {
		t.Run(tc.pol, func(t *testing.T) {
			d, objs, infos := narrowCluster(t, used)
			f := startWithDRA(t, &GPUShareArgs{Policy: tc.pol}, d, objs...)
			res, status := f.pl.PreFilter(context.Background(), newState(), claimPod("nb", "notebook"), infos)
			if !status.IsSuccess() || res == nil {
				t.Fatalf("PreFilter = %v, %v", res, status)
			}
			if res.NodeNames.Len() != tc.want {
				t.Errorf("narrowed to %d nodes, want %d", res.NodeNames.Len(), tc.want)
			}
			if tc.pol == "binpack" && (!res.NodeNames.Has("n12") || res.NodeNames.Has("n00")) {
				t.Errorf("binpack kept %v: want n12 (12 GiB taken) in, n00 (empty) out", sets.List(res.NodeNames))
			}
		})
	}
}

// TestDRANarrowFallsBack: every node is left to the allocator when no node's cards hold the
// claim, and for a pod narrowed before and not placed since; Reserve ends that.
func TestDRANarrowFallsBack(t *testing.T) {
	d, objs, infos := narrowCluster(t, map[string]int{"full": 16, "a": 14})
	f := startWithDRA(t, &GPUShareArgs{Policy: "binpack"}, d, objs...)
	ctx := context.Background()
	pod := claimPod("nb", "notebook")
	if res, status := f.pl.PreFilter(ctx, newState(), pod, infos); !status.IsSuccess() || res == nil {
		t.Fatalf("first PreFilter = %v, %v; want narrowed", res, status)
	}
	st := newState()
	if res, status := f.pl.PreFilter(ctx, st, pod, infos); !status.IsSkip() || res != nil {
		t.Errorf("retry's PreFilter = %v, %v; want Skip (every node)", res, status)
	}
	if s := f.pl.Reserve(ctx, st, pod, "a"); !s.IsSuccess() {
		t.Fatal(s)
	}
	if res, status := f.pl.PreFilter(ctx, newState(), pod, infos); !status.IsSuccess() || res == nil {
		t.Errorf("PreFilter after Reserve = %v, %v; want narrowed again", res, status)
	}

	big := claimPod("big", "huge")
	d.claims = append(d.claims, pending("huge", ask("20Gi", 1)))
	d.byName = nil
	if res, status := f.pl.PreFilter(ctx, newState(), big, infos); !status.IsSkip() || res != nil {
		t.Errorf("PreFilter of a claim no card holds = %v, %v; want Skip (every node)", res, status)
	}
}

// TestDRANarrowWindow: PreFilter rates a window of claimNodesToRate nodes from a rotating
// start, and every node when none in the window holds the claim; with claimNarrowing off it
// skips claim pods.
func TestDRANarrowWindow(t *testing.T) {
	used := map[string]int{"n0": 16, "n1": 0, "n2": 16, "n3": 0, "n4": 16}
	d, objs, infos := narrowCluster(t, used) // cpu, n0 .. n4
	f := startWithDRA(t, &GPUShareArgs{Policy: "binpack", ClaimNodesToRate: ptr.To[int32](2)}, d, objs...)
	ctx := context.Background()
	for i, want := range []sets.Set[string]{
		sets.New("n1", "n3"), // window cpu, n0: none holds the claim, every node is rated
		sets.New("n1"),       // window n1, n2
		sets.New("n3"),       // window n3, n4
		sets.New("n1", "n3"), // round again
	} {
		res, status := f.pl.PreFilter(ctx, newState(), claimPod(fmt.Sprintf("nb%d", i), "notebook"), infos)
		if !status.IsSuccess() || res == nil || !res.NodeNames.Equal(want) {
			t.Errorf("pod %d: PreFilter = %v, %v; want %v", i, res, status, sets.List(want))
		}
	}

	off := startWithDRA(t, &GPUShareArgs{Policy: "binpack", ClaimNarrowing: ptr.To(false)}, d, objs...)
	if res, status := off.pl.PreFilter(ctx, newState(), claimPod("nb", "notebook"), infos); !status.IsSkip() || res != nil {
		t.Errorf("claimNarrowing false: PreFilter = %v, %v; want Skip", res, status)
	}
}

// TestDRANarrowAdmission: under a packing policy a claim pod is narrowed to nodes its
// nodeSelector matches, however well the others rate; one with required anti-affinity is not
// narrowed.
func TestDRANarrowAdmission(t *testing.T) {
	used := map[string]int{}
	for i := range narrowNodes + 8 {
		used[fmt.Sprintf("n%02d", i)] = i % 13
	}
	d, objs, infos := narrowCluster(t, used)
	for i, info := range infos {
		n := info.(testNodeInfo)
		node := n.node.DeepCopy()
		if node.Name < "n06" { // n00..n05 and cpu: pool a
			node.Labels = map[string]string{"pool": "a"}
		}
		infos[i] = n.withNode(node)
	}
	f := startWithDRA(t, &GPUShareArgs{Policy: "binpack"}, d, objs...)
	pod := claimPod("nb", "notebook")
	pod.Spec.NodeSelector = map[string]string{"pool": "a"}
	res, status := f.pl.PreFilter(context.Background(), newState(), pod, infos)
	if !status.IsSuccess() || res == nil {
		t.Fatalf("PreFilter = %v, %v; want narrowed", res, status)
	}
	if want := sets.New("n00", "n01", "n02", "n03", "n04", "n05"); !res.NodeNames.Equal(want) {
		t.Errorf("narrowed to %v, want the pool's DRA nodes %v", sets.List(res.NodeNames), sets.List(want))
	}

	anti := claimPod("anti", "notebook")
	anti.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{TopologyKey: v1.LabelHostname}}}}
	if res, status := f.pl.PreFilter(context.Background(), newState(), anti, infos); !status.IsSkip() || res != nil {
		t.Errorf("PreFilter of a claim pod with required anti-affinity = %v, %v; want Skip (every node)", res, status)
	}
}

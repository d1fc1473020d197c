package schedulerplugin

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// viewString summarises a view as "node: idx:used/total ..." lines, sorted, an unhealthy
// card marked "!".
func viewString(v *draView) string {
	var lines []string
	for _, name := range slices.Sorted(maps.Keys(v.nodes)) {
		n := v.nodes[name]
		parts := []string{name + ":"}
		for _, c := range n.cards {
			p := fmt.Sprintf("%d:%d/%d", c.Index, c.Used, c.Total)
			if !c.Healthy {
				p += "!"
			}
			parts = append(parts, p)
		}
		lines = append(lines, strings.Join(parts, " "))
	}
	return strings.Join(lines, "\n")
}

func TestDRAView(t *testing.T) {
	quarter := gpushare.Unit{MiB: 256}
	older := draSlice(t, "n1", gpushare.GiB, []int64{8})
	older.Spec.Pool.Generation = 0
	other := draSlice(t, "n1", gpushare.GiB, []int64{16})
	other.Spec.Driver = "gpu.nvidia.com"
	tests := []struct {
		name   string
		slices []*resourceapi.ResourceSlice
		claims []*resourceapi.ResourceClaim
		// editSecond, when set, makes the slices one node of two cards with the second
		// card's device edited.
		editSecond func(d *resourceapi.Device)
		want       string
	}{
		{
			name:   "claims add up per card",
			slices: []*resourceapi.ResourceSlice{draSlice(t, "n1", gpushare.GiB, []int64{14, 14}), draSlice(t, "n2", quarter, []int64{56})},
			claims: []*resourceapi.ResourceClaim{
				allocated("a", held{"n1", "gpu-0", "4Gi"}), allocated("b", held{"n1", "gpu-0", "2Gi"}),
				allocated("c", held{"n1", "gpu-1", "1Gi"}, held{"n2", "gpu-0", "1792Mi"}),
				pending("not-allocated", ask("4Gi", 1)),
			},
			want: "n1: 0:6/14 1:1/14\nn2: 0:7/56",
		},
		{
			// The allocator rounds a request up to the policy's step; anything else is an odd record.
			name:   "consumed memory that is not a positive whole number of units fills its card",
			slices: []*resourceapi.ResourceSlice{draSlice(t, "n1", gpushare.GiB, []int64{14, 14}), draSlice(t, "n2", quarter, []int64{56})},
			claims: []*resourceapi.ResourceClaim{
				allocated("a", held{"n1", "gpu-0", "4Gi"}), allocated("b", held{"n1", "gpu-0", "1500Mi"}),
				allocated("nothing", held{"n1", "gpu-1", "0"}), allocated("c", held{"n2", "gpu-0", "1500Mi"}),
			},
			want: "n1: 0:14/14 1:14/14\nn2: 0:56/56",
		},
		{
			name:   "a result without consumed memory holds the whole card",
			slices: []*resourceapi.ResourceSlice{draSlice(t, "n1", gpushare.GiB, []int64{14, 14})},
			claims: []*resourceapi.ResourceClaim{allocated("a", held{"n1", "gpu-1", ""})},
			want:   "n1: 0:0/14 1:14/14",
		},
		{
			name:   "a tainted card is unhealthy",
			slices: []*resourceapi.ResourceSlice{draSlice(t, "n1", gpushare.GiB, []int64{14, 14}, 1)},
			want:   "n1: 0:0/14 1:0/14!",
		},
		{
			name:   "only the gpushare driver's newest generation",
			slices: []*resourceapi.ResourceSlice{older, other, draSlice(t, "n1", gpushare.GiB, []int64{14})},
			claims: []*resourceapi.ResourceClaim{allocated("a", held{"n1", "gpu-0", "2Gi"})},
			want:   "n1: 0:2/14",
		},
		{
			name:   "fail closed: a negative consumed quantity fills the card",
			slices: []*resourceapi.ResourceSlice{draSlice(t, "n1", gpushare.GiB, []int64{14, 14})},
			claims: []*resourceapi.ResourceClaim{allocated("a", held{"n1", "gpu-0", "-4Gi"})},
			want:   "n1: 0:14/14 1:0/14",
		},
		{
			name:   "fail closed: a huge consumed quantity fills the card",
			slices: []*resourceapi.ResourceSlice{draSlice(t, "n1", gpushare.GiB, []int64{14, 14})},
			claims: []*resourceapi.ResourceClaim{allocated("a", held{"n1", "gpu-1", "9Ei"})},
			want:   "n1: 0:0/14 1:14/14",
		},
		{
			name:   "fail closed: a claim on a device the slices do not list fills the node",
			slices: []*resourceapi.ResourceSlice{draSlice(t, "n1", gpushare.GiB, []int64{14, 14}), draSlice(t, "n2", gpushare.GiB, []int64{14})},
			claims: []*resourceapi.ResourceClaim{allocated("a", held{"n1", "gpu-7", "1Gi"}), allocated("elsewhere", held{"gone", "gpu-0", "1Gi"})},
			want:   "n1: 0:14/14 1:14/14\nn2: 0:0/14",
		},
		{
			name:       "fail closed: a device without an index offers nothing",
			editSecond: func(d *resourceapi.Device) { delete(d.Attributes, gpushare.DRAAttributeIndex) },
			want:       "n1: 0:0/14",
		},
		{
			name: "fail closed: a second device of one index offers nothing",
			editSecond: func(d *resourceapi.Device) {
				d.Attributes[gpushare.DRAAttributeIndex] = resourceapi.DeviceAttribute{IntValue: ptr.To[int64](0)}
			},
			want: "n1: 0:0/14",
		},
		{
			name:       "fail closed: a device without memory offers nothing",
			editSecond: func(d *resourceapi.Device) { delete(d.Capacity, gpushare.DRACapacityMemory) },
			want:       "n1: 0:0/14",
		},
		{
			name: "fail closed: a device with another step is full",
			editSecond: func(d *resourceapi.Device) {
				d.Capacity[gpushare.DRACapacityMemory].RequestPolicy.ValidRange.Step = resource.NewQuantity(1<<28, resource.BinarySI)
			},
			want: "n1: 0:0/14 1:14/14",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.editSecond != nil {
				s := draSlice(t, "n1", gpushare.GiB, []int64{14, 14})
				tc.editSecond(&s.Spec.Devices[1])
				tc.slices = []*resourceapi.ResourceSlice{s}
			}
			if got := viewString(newDRAView(tc.slices, tc.claims, nil, nil)); got != tc.want {
				t.Errorf("view:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// requestString summarises a request as "units/cards" per container.
func requestString(req gpushare.PodRequest, err error) string {
	if err != nil {
		return "error"
	}
	var parts []string
	for _, c := range req.Containers {
		parts = append(parts, fmt.Sprintf("%d/%d", c.Units, c.Cards))
	}
	return strings.Join(parts, " ")
}

func TestDRARequest(t *testing.T) {
	other := pending("other-class", ask("4Gi", 1))
	other.Spec.Devices.Requests[0].Exactly.DeviceClassName = "gpu.nvidia.com"
	all := pending("all", ask("2Gi", 1))
	all.Spec.Devices.Requests[0].Exactly.AllocationMode = resourceapi.DeviceAllocationModeAll
	prioritized := pending("prioritized")
	prioritized.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "r", FirstAvailable: []resourceapi.DeviceSubRequest{
		{Name: "big", DeviceClassName: gpushare.DRADriverName, Count: 1, Capacity: ask("8Gi", 1).Capacity},
		{Name: "small", DeviceClassName: gpushare.DRADriverName, Count: 1, Capacity: ask("2Gi", 1).Capacity},
	}}}
	claims := &fakeDRA{claims: []*resourceapi.ResourceClaim{
		pending("notebook", ask("4Gi", 1)), pending("odd-size", ask("1500Mi", 1)), pending("two-cards", ask("2Gi", 2)),
		pending("default", ask("", 1)), pending("two-requests", ask("1Gi", 1), ask("3Gi", 1)),
		allocated("done", held{"n1", "gpu-0", "4Gi"}), other, all, prioritized,
	}}
	// Two nodes of three cards: GiB units and 256 MiB units.
	gib := newDRAView([]*resourceapi.ResourceSlice{draSlice(t, "gib", gpushare.GiB, []int64{14, 14, 14})}, nil, nil, nil).nodes["gib"]
	quarter := newDRAView([]*resourceapi.ResourceSlice{draSlice(t, "quarter", gpushare.Unit{MiB: 256}, []int64{56, 56, 56})}, nil, nil, nil).nodes["quarter"]
	tests := []struct {
		name         string
		claims       []string
		gib, quarter string
	}{
		{name: "notebook", claims: []string{"notebook"}, gib: "4/1", quarter: "16/1"},
		{name: "rounded up to the node's unit", claims: []string{"odd-size"}, gib: "2/1", quarter: "6/1"},
		{name: "count: that memory on each card", claims: []string{"two-cards"}, gib: "4/2", quarter: "16/2"},
		{name: "no memory request: the policy's default", claims: []string{"default"}, gib: "1/1", quarter: "1/1"},
		{name: "requests and claims in order", claims: []string{"two-requests", "notebook"}, gib: "1/1 3/1 4/1", quarter: "4/1 12/1 16/1"},
		{name: "allocationMode All: every card", claims: []string{"all"}, gib: "6/3", quarter: "24/3"},
		{name: "a prioritized list: its first subrequest", claims: []string{"prioritized"}, gib: "8/1", quarter: "32/1"},
		{name: "an allocated claim asks nothing new", claims: []string{"done", "notebook"}, gib: "4/1", quarter: "16/1"},
		{name: "another class is not ours", claims: []string{"other-class"}},
		{name: "a claim not created yet", claims: []string{"missing"}},
		{name: "a claim named twice counts once", claims: []string{"notebook", "notebook"}, gib: "4/1", quarter: "16/1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := readDRARequest(claimPod("p", tc.claims...), claims.ResourceClaims())
			if err != nil {
				t.Fatal(err)
			}
			if len(req) == 0 {
				if tc.gib != "" {
					t.Fatalf("no request, want %s", tc.gib)
				}
				return
			}
			if got := requestString(req.podRequest(gib)); got != tc.gib {
				t.Errorf("on a GiB node: %s, want %s", got, tc.gib)
			}
			if got := requestString(req.podRequest(quarter)); got != tc.quarter {
				t.Errorf("on a 256 MiB node: %s, want %s", got, tc.quarter)
			}
		})
	}
	// A template whose claim is not generated yet asks nothing; a broken tracker is an error.
	pod := claimPod("p", "notebook")
	pod.Status.ResourceClaimStatuses = nil
	if req, err := readDRARequest(pod, claims.ResourceClaims()); len(req) != 0 || err != nil {
		t.Errorf("claim not generated yet: %v, %v", req, err)
	}
	if _, err := readDRARequest(claimPod("p", "notebook"), (&fakeDRA{err: errTracker}).ResourceClaims()); err == nil {
		t.Error("a failing tracker gave no error")
	}
}

// draScores runs PreFilter, PreScore, Score and NormalizeScore for pod on nodes, by node
// name; a PreFilter that narrows the nodes still has all of them scored.
func draScores(t *testing.T, f *fixture, pod *v1.Pod, nodes ...string) (map[string]int64, *fwk.Status) {
	t.Helper()
	ctx := context.Background()
	infos := make([]fwk.NodeInfo, len(nodes))
	list := make(fwk.NodeScoreList, len(nodes))
	for i, n := range nodes {
		infos[i], list[i].Name = nodeInfo(n), n
	}
	st := newState()
	if _, status := f.pl.PreFilter(ctx, st, pod, infos); !status.IsSuccess() && !status.IsSkip() {
		return nil, status
	}
	if s := f.pl.PreScore(ctx, st, pod, infos); !s.IsSuccess() {
		return nil, s
	}
	for _, n := range infos {
		if _, s := f.pl.Score(ctx, st, pod, n); !s.IsSuccess() {
			t.Fatal(s)
		}
	}
	if s := f.pl.NormalizeScore(ctx, st, pod, list); !s.IsSuccess() {
		t.Fatal(s)
	}
	out := map[string]int64{}
	for _, s := range list {
		out[s.Name] = s.Score
	}
	return out, nil
}

// packing is two DRA nodes of two 16 GiB cards, the pod's 4 GiB claim and a workload of
// 4-unit pods (on a device-plugin node, where fgd learns it). First-fit puts the claim on
// "frag"'s card 0 (6 free), leaving 2 units no typical pod can use, where the policy's own
// choice would fill its card 1 (4 free) exactly; on "clean" first-fit fragments nothing.
func packing(t *testing.T) (*fakeDRA, []runtime.Object) {
	d := &fakeDRA{
		slices: []*resourceapi.ResourceSlice{draSlice(t, "frag", gpushare.GiB, []int64{16, 16}), draSlice(t, "clean", gpushare.GiB, []int64{16, 16})},
		claims: []*resourceapi.ResourceClaim{
			allocated("f0", held{"frag", "gpu-0", "10Gi"}), allocated("f1", held{"frag", "gpu-1", "12Gi"}),
			allocated("c0", held{"clean", "gpu-0", "8Gi"}),
			pending("notebook", ask("4Gi", 1)),
		},
	}
	objs := []runtime.Object{ct.Node("dp", 16, 16, 16, 16)}
	for i := range 4 {
		objs = append(objs, ct.Placed(ct.Pod(fmt.Sprintf("w%d", i), 4), "dp", gpushare.CardUnits{i: 4}))
	}
	return d, objs
}

func TestDRAScoreFollowsFirstFit(t *testing.T) {
	d, objs := packing(t)
	f := startWithDRA(t, &GPUShareArgs{Policy: "fgd"}, d, objs...)
	pod := claimPod("nb", "notebook")
	got, status := draScores(t, f, pod, "frag", "clean", "dp", "cpu-only")
	if status != nil {
		t.Fatal(status)
	}
	if got["clean"] != fwk.MaxNodeScore || got["frag"] >= got["clean"] {
		t.Errorf("scores %v: want clean (first-fit fragments nothing) on top, above frag", got)
	}
	if got["dp"] != 0 || got["cpu-only"] != 0 {
		t.Errorf("scores %v: nodes without a gpushare ResourceSlice score 0", got)
	}

	// The rule matters: rated by the policy's own card choice, frag would not lose.
	pol := f.pl.cache.ForPod(f.pl.pol)
	view := newDRAView(d.slices, d.claims, nil, nil)
	req := gpushare.PodRequest{Containers: []gpushare.ContainerRequest{{Units: 4, Cards: 1}}}
	own := func(name string) float64 {
		node := policy.Node{Name: name, Cards: view.nodes[name].cards}
		pl, err := pol.Place(node, req)
		if err != nil {
			t.Fatal(err)
		}
		return pol.Score(node, pl)
	}
	if own("frag") < own("clean") {
		t.Errorf("the policy's own choice rates frag %v below clean %v: the case does not tell first-fit apart", own("frag"), own("clean"))
	}
}

func TestDRAScoreFailsClosed(t *testing.T) {
	d, objs := packing(t)
	// frag holds a claim on a device its slices do not list: every card of it counts as
	// full, so the pod fits there nowhere. clean's card 0 holds a claim whose consumed
	// memory is negative: that card counts as full, and card 1 still takes the pod.
	d.claims = append(d.claims, allocated("odd", held{"clean", "gpu-0", "-1"}), allocated("lost", held{"frag", "gpu-9", "1Gi"}))
	f := startWithDRA(t, &GPUShareArgs{Policy: "binpack"}, d, objs...)
	got, status := draScores(t, f, claimPod("nb", "notebook"), "frag", "clean")
	if status != nil {
		t.Fatal(status)
	}
	if got["frag"] != 0 || got["clean"] != fwk.MaxNodeScore {
		t.Errorf("scores %v: want frag 0 (full), clean on top", got)
	}

	d.err = errTracker
	if _, status := draScores(t, f, claimPod("nb", "notebook"), "frag", "clean"); status.IsSuccess() || status.IsSkip() {
		t.Errorf("PreFilter and PreScore with a failing tracker = %v, want an error", status)
	}
}

// TestDRAPodsBypassGPUShare: a pod whose memory comes from claims is filtered, reserved and
// bound by DynamicResources and DefaultBinder; GPUShare only narrows the nodes (here: none
// given, nothing to narrow) and scores it.
func TestDRAPodsBypassGPUShare(t *testing.T) {
	d, objs := packing(t)
	f := startWithDRA(t, &GPUShareArgs{Policy: "binpack"}, d, objs...)
	ctx := context.Background()
	pod := claimPod("nb", "notebook")
	st, res, status := f.prefilter(t, pod)
	if !status.IsSkip() || res != nil {
		t.Fatalf("PreFilter = %v, %v; want Skip", res, status)
	}
	if s := f.pl.PreScore(ctx, st, pod, []fwk.NodeInfo{nodeInfo("frag"), nodeInfo("clean")}); !s.IsSuccess() {
		t.Fatalf("PreScore = %v", s)
	}
	if s := f.pl.Reserve(ctx, st, pod, "clean"); !s.IsSuccess() {
		t.Fatalf("Reserve = %v", s)
	}
	if s := f.pl.Bind(ctx, st, pod, "clean"); !s.IsSkip() {
		t.Fatalf("Bind = %v, want Skip (DefaultBinder binds it after DynamicResources' PreBind)", s)
	}
	f.pl.Unreserve(ctx, st, pod, "clean")
	if got := f.cards("dp"); got != "0:4/16 1:4/16 2:4/16 3:4/16" {
		t.Errorf("ledger changed: %s", got)
	}

	// Claims of another class, or all allocated, leave the pod as a pod without gpu-mem:
	// binpack does not score it.
	other := pending("other", ask("4Gi", 1))
	other.Spec.Devices.Requests[0].Exactly.DeviceClassName = "gpu.nvidia.com"
	d.claims = append(d.claims, other)
	for _, claim := range []string{"other", "f0"} {
		pod := claimPod("p-"+claim, claim)
		st, _, _ := f.prefilter(t, pod)
		if s := f.pl.PreScore(ctx, st, pod, []fwk.NodeInfo{nodeInfo("frag")}); !s.IsSkip() {
			t.Errorf("claim %s: PreScore = %v, want Skip", claim, s)
		}
	}
}

// TestDevicePluginPodsIgnoreDRA: with DRA objects about, a gpu-mem pod scores as without
// them.
func TestDevicePluginPodsIgnoreDRA(t *testing.T) {
	d, objs := packing(t)
	objs = append(objs, ct.Node("n1", 16, 16), ct.Placed(ct.Pod("x", 6), "n1", gpushare.CardUnits{1: 6}))
	withDRA := startWithDRA(t, &GPUShareArgs{Policy: "fgd"}, d, objs...)
	without := start(t, &GPUShareArgs{Policy: "fgd"}, objs...)
	pod := ct.Pod("p", 4)
	pod.Spec.ResourceClaims = claimPod("p", "notebook").Spec.ResourceClaims
	pod.Status = claimPod("p", "notebook").Status
	score := func(f *fixture) fwk.NodeScoreList {
		ctx := context.Background()
		st, _, status := f.prefilter(t, pod)
		if !status.IsSuccess() {
			t.Fatal(status)
		}
		names := []string{"dp", "n1", "frag"}
		infos := []fwk.NodeInfo{nodeInfo("dp"), nodeInfo("n1"), nodeInfo("frag")}
		if s := f.pl.PreScore(ctx, st, pod, infos); !s.IsSuccess() {
			t.Fatal(s)
		}
		list := make(fwk.NodeScoreList, len(names))
		for i, n := range names {
			list[i].Name = n
		}
		if s := f.pl.NormalizeScore(ctx, st, pod, list); !s.IsSuccess() {
			t.Fatal(s)
		}
		return list
	}
	if a, b := score(withDRA), score(without); !slices.Equal(a, b) {
		t.Errorf("with DRA objects %v, without %v", a, b)
	}
}

// TestDRAScoreInPieces: PreScore's rates, taken in parallel pieces, equal the rates of the
// same nodes listed in another order (NormalizeScore then rates them afresh in one pass).
func TestDRAScoreInPieces(t *testing.T) {
	d := &fakeDRA{claims: []*resourceapi.ResourceClaim{pending("notebook", ask("3Gi", 1))}}
	var names []string
	for i := range 2*scoreChunk + 5 {
		n := fmt.Sprintf("n%03d", i)
		names = append(names, n)
		d.slices = append(d.slices, draSlice(t, n, gpushare.GiB, []int64{16, 16}))
		d.claims = append(d.claims, allocated("on-"+n, held{n, fmt.Sprintf("gpu-%d", i%2), fmt.Sprintf("%dGi", i%15)}))
	}
	f := startWithDRA(t, &GPUShareArgs{Policy: "fgd"}, d)
	reversed := slices.Clone(names)
	slices.Reverse(reversed)
	pod := claimPod("nb", "notebook")
	ctx := context.Background()
	st, _, _ := f.prefilter(t, pod)
	infos := make([]fwk.NodeInfo, len(names))
	for i, n := range names {
		infos[i] = nodeInfo(n)
	}
	if s := f.pl.PreScore(ctx, st, pod, infos); !s.IsSuccess() {
		t.Fatal(s)
	}
	list := func(order []string) map[string]int64 {
		l := make(fwk.NodeScoreList, len(order))
		for i, n := range order {
			l[i].Name = n
		}
		if s := f.pl.NormalizeScore(ctx, st, pod, l); !s.IsSuccess() {
			t.Fatal(s)
		}
		out := map[string]int64{}
		for _, s := range l {
			out[s.Name] = s.Score
		}
		return out
	}
	inPieces, afresh := list(names), list(reversed)
	if !maps.Equal(inPieces, afresh) {
		t.Errorf("PreScore's rates %v differ from a single pass's %v", inPieces, afresh)
	}
	if slices.Max(slices.Collect(maps.Values(inPieces))) != fwk.MaxNodeScore {
		t.Errorf("no node on top: %v", inPieces)
	}
}

// TestSliceMemo: a slice object is read once; slices no longer listed are forgotten once
// the memo holds more than twice the live ones.
func TestSliceMemo(t *testing.T) {
	var memo sliceMemo
	a := draSlice(t, "a", gpushare.GiB, []int64{14})
	first := memo.devices(a)
	a.Spec.Devices[0].Name = "changed in place" // informer objects never are: the memo keeps what it read
	if got := memo.devices(a); got[0].name != first[0].name || got[0].name != "gpu-0" {
		t.Errorf("read again: %+v", got)
	}
	var replaced []*resourceapi.ResourceSlice
	for i := range 100 {
		replaced = append(replaced, draSlice(t, fmt.Sprintf("n%d", i), gpushare.GiB, []int64{14}))
		memo.devices(replaced[i])
	}
	memo.prune([]*resourceapi.ResourceSlice{a})
	if len(memo.m) != 1 || memo.m[a] == nil {
		t.Errorf("after pruning to one live slice the memo holds %d", len(memo.m))
	}
	memo.devices(replaced[0])
	memo.prune(replaced[:50])
	if len(memo.m) != 2 {
		t.Errorf("below twice the live slices the memo is kept whole: %d entries, want 2", len(memo.m))
	}
}

// TestDRAClaimShapesTeachFGD: where every GPU pod asks through claims, fgd's typical pods
// come from the claims the plugin scores (cache.ObserveClaimShape), not from the pods'
// objects, which show no GPU: without them first fit's fragment would cost nothing.
func TestDRAClaimShapesTeachFGD(t *testing.T) {
	d, _ := packing(t)
	f := startWithDRA(t, &GPUShareArgs{Policy: "fgd"}, d)
	got, status := draScores(t, f, claimPod("nb", "notebook"), "frag", "clean")
	if status != nil {
		t.Fatal(status)
	}
	if got["clean"] != fwk.MaxNodeScore || got["frag"] >= got["clean"] {
		t.Errorf("scores %v: want clean (first fit fragments nothing for 4 GiB pods) above frag", got)
	}
}

// TestDRACardsForPodsWithoutGPU: under fgd a pod that asks no GPU memory is rated by what
// its CPU leaves the GPU pods on each node, and on a DRA node those cards are in its
// ResourceSlice, not in the ledger: the pod goes where taking CPU strands no free card.
func TestDRACardsForPodsWithoutGPU(t *testing.T) {
	d := &fakeDRA{
		slices: []*resourceapi.ResourceSlice{draSlice(t, "gpufree", gpushare.GiB, []int64{16, 16}), draSlice(t, "gpufull", gpushare.GiB, []int64{16, 16})},
		claims: []*resourceapi.ResourceClaim{allocated("full", held{"gpufull", "gpu-0", "16Gi"}, held{"gpufull", "gpu-1", "16Gi"})},
	}
	withHost := func(n *v1.Node) *v1.Node {
		n.Status.Allocatable = v1.ResourceList{v1.ResourceCPU: resource.MustParse("8"), v1.ResourceMemory: resource.MustParse("64Gi"), v1.ResourcePods: resource.MustParse("110")}
		return n
	}
	withCPU := func(p *v1.Pod, cpu string) *v1.Pod {
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}
		return p
	}
	// The workload the ledger learns: GPU pods of 4 units and 4 cores each.
	objs := []runtime.Object{withHost(ct.BareNode("gpufree")), withHost(ct.BareNode("gpufull")), withHost(ct.Node("dp", 16, 16, 16, 16))}
	for i := range 4 {
		objs = append(objs, withCPU(ct.Placed(ct.Pod(fmt.Sprintf("w%d", i), 4), "dp", gpushare.CardUnits{i: 4}), "4"))
	}
	f := startWithDRA(t, &GPUShareArgs{Policy: "fgd"}, d, objs...)
	got, status := draScores(t, f, withCPU(ct.Pod("cpu", 0), "4"), "gpufree", "gpufull")
	if status != nil {
		t.Fatal(status)
	}
	if got["gpufull"] <= got["gpufree"] {
		t.Errorf("scores %v: want gpufull (no free card to strand) above gpufree", got)
	}
}

package schedulerplugin

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// cards summarises a node's cards as "idx:used/total", "" when the ledger has no such node.
func (f *fixture) cards(node string) string {
	n, ok := f.pl.cache.InspectNode(node)
	if !ok {
		return ""
	}
	var parts []string
	for _, c := range n.Cards {
		parts = append(parts, fmt.Sprintf("%d:%d/%d", c.Index, c.Used, c.Total))
	}
	return strings.Join(parts, " ")
}

func unlabelled(n *v1.Node) *v1.Node {
	delete(n.Labels, gpushare.NodeLabelKey)
	return n
}

// isolation labels n with gpushare.LabelIsolation=mode.
func isolation(n *v1.Node, mode string) *v1.Node {
	n.Labels[gpushare.LabelIsolation] = mode
	return n
}

func TestFilter(t *testing.T) {
	invalid := ct.Pod("invalid", 0)
	ct.SetGPU(&invalid.Spec.Containers[0], 10, 3) // 10 units over 3 cards: not divisible
	two := ct.Pod("two", 8)
	ct.SetGPU(&two.Spec.Containers[0], 8, 2) // 4 units on each of 2 cards
	f := start(t, nil,
		ct.Node("n1", 16, 16), unlabelled(ct.Node("plain", 16)),
		isolation(ct.Node("mps", 16, 16), "mps"), isolation(ct.Node("typo", 16, 16), "MPS"),
		ct.Placed(ct.Pod("a", 10), "n1", gpushare.CardUnits{0: 10}),
		ct.Placed(ct.Pod("b", 10), "n1", gpushare.CardUnits{1: 10}))
	tests := []struct {
		name          string
		pod           *v1.Pod
		node          string
		wantPreFilter fwk.Code
		want          fwk.Code
		wantReason    string
	}{
		{"fits", ct.Pod("p6", 6), "n1", fwk.Success, fwk.Success, ""},
		{"card shortfall", ct.Pod("p8", 8), "n1", fwk.Success, fwk.Unschedulable,
			"gpu-mem: need 8 on one card; largest free 6 (card0 6/16, card1 6/16)"},
		{"not a gpushare node", ct.Pod("p1", 1), "plain", fwk.Success, fwk.UnschedulableAndUnresolvable,
			"not a gpushare node (no cgpu=true label or no gpu-mem)"},
		{"unknown node", ct.Pod("p1", 1), "gone", fwk.Success, fwk.UnschedulableAndUnresolvable,
			"not a gpushare node (no cgpu=true label or no gpu-mem)"},
		{"no gpu-mem", ct.Pod("cpu", 0), "plain", fwk.Skip, fwk.Success, ""},
		{"invalid request", invalid, "n1", fwk.UnschedulableAndUnresolvable, fwk.Success, ""},
		{"mps node, one card", ct.Pod("p6", 6), "mps", fwk.Success, fwk.Success, ""},
		{"mps node, two cards", two, "mps", fwk.Success, fwk.UnschedulableAndUnresolvable,
			`node isolates cards with MPS (gpushare.io/isolation=mps): one card per container, and container "main" asks for 2`},
		{"invalid isolation label", ct.Pod("p1", 1), "typo", fwk.Success, fwk.UnschedulableAndUnresolvable,
			`node refuses GPU pods until its isolation label is fixed: node label gpushare.io/isolation="MPS": want none, mps or limit`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, _, status := f.prefilter(t, tc.pod)
			if status.Code() != tc.wantPreFilter {
				t.Fatalf("PreFilter = %v, want %v", status, tc.wantPreFilter)
			}
			if tc.wantPreFilter != fwk.Success {
				return // the framework runs no Filter of this plugin
			}
			got := f.pl.Filter(context.Background(), st, tc.pod, nodeInfo(tc.node))
			if got.Code() != tc.want || got.Message() != tc.wantReason {
				t.Fatalf("Filter = %v %q, want %v %q", got.Code(), got.Message(), tc.want, tc.wantReason)
			}
		})
	}
}

// TestPreemptionDryRun: the victims preemption removes free their cards for the preemptor
// in that node's dry run only, re-added victims take them back, and a nominated pod takes
// the cards the policy gives it.
func TestPreemptionDryRun(t *testing.T) {
	low := ct.Placed(ct.Pod("low", 16), "n1", gpushare.CardUnits{0: 16})
	f := start(t, nil, ct.Node("n1", 16), ct.Node("n2", 16), low)
	high := ct.Pod("high", 16)
	ctx := context.Background()
	st, _, status := f.prefilter(t, high)
	if !status.IsSuccess() {
		t.Fatal(status)
	}
	if s := f.pl.Filter(ctx, st, high, nodeInfo("n1")); s.Code() != fwk.Unschedulable {
		t.Fatalf("full card: Filter = %v, want Unschedulable (resolvable by preemption)", s)
	}

	dry := st.Clone()
	if s := f.pl.RemovePod(ctx, dry, high, testPodInfo{pod: low}, nodeInfo("n1")); !s.IsSuccess() {
		t.Fatal(s)
	}
	if s := f.pl.Filter(ctx, dry, high, nodeInfo("n1")); !s.IsSuccess() {
		t.Fatalf("victim removed: Filter = %v, want success", s)
	}
	if s := f.pl.Filter(ctx, st, high, nodeInfo("n1")); s.IsSuccess() {
		t.Fatal("the dry run changed the original cycle state")
	}
	if got := f.cards("n1"); got != "0:16/16" {
		t.Fatalf("the dry run changed the ledger: %s", got)
	}
	if s := f.pl.AddPod(ctx, dry, high, testPodInfo{pod: low}, nodeInfo("n1")); !s.IsSuccess() {
		t.Fatal(s)
	}
	if s := f.pl.Filter(ctx, dry, high, nodeInfo("n1")); s.Code() != fwk.Unschedulable {
		t.Fatalf("victim re-added: Filter = %v, want Unschedulable", s)
	}

	// A nominated pod (not in the ledger) takes its card on n2 for this cycle.
	nominated := ct.Pod("nominated", 12)
	if s := f.pl.AddPod(ctx, dry, high, testPodInfo{pod: nominated}, nodeInfo("n2")); !s.IsSuccess() {
		t.Fatal(s)
	}
	if s := f.pl.Filter(ctx, dry, high, nodeInfo("n2")); s.Code() != fwk.Unschedulable {
		t.Fatalf("nominated pod added: Filter = %v, want Unschedulable", s)
	}
	if s := f.pl.RemovePod(ctx, dry, high, testPodInfo{pod: nominated}, nodeInfo("n2")); !s.IsSuccess() {
		t.Fatal(s)
	}
	if s := f.pl.Filter(ctx, dry, high, nodeInfo("n2")); !s.IsSuccess() {
		t.Fatalf("nominated pod removed again: Filter = %v, want success", s)
	}
}

// TestScoreRanksAsPrioritize: PreScore + Score + NormalizeScore give each node the
// extender's prioritize priority (policy.NormalizeScores of the Scorer's rates), scaled to
// 0-100, on more nodes than one PreScore piece rates, and for a node list in another order.
func TestScoreRanksAsPrioritize(t *testing.T) {
	for _, name := range []string{"binpack", "spread", "fgd"} {
		t.Run(name, func(t *testing.T) {
			var objs []runtime.Object
			var names []string
			for i := range 2*scoreChunk + 3 {
				n := fmt.Sprintf("n%03d", i)
				names = append(names, n)
				objs = append(objs, ct.Node(n, 16, 16))
				if used := int64(i % 15); used > 0 {
					objs = append(objs, ct.Placed(ct.Pod("on-"+n, used), n, gpushare.CardUnits{i % 2: used}))
				}
			}
			f := start(t, &GPUShareArgs{Policy: name}, objs...)
			pod := ct.Pod("p", 2)
			ctx := context.Background()
			st, _, status := f.prefilter(t, pod)
			if !status.IsSuccess() {
				t.Fatal(status)
			}
			infos := make([]fwk.NodeInfo, len(names))
			for i, n := range names {
				infos[i] = nodeInfo(n)
			}
			if s := f.pl.PreScore(ctx, st, pod, infos); !s.IsSuccess() {
				t.Fatal(s)
			}
			scoreList := func(st fwk.CycleState, order []string) fwk.NodeScoreList {
				var scores fwk.NodeScoreList
				for _, n := range order {
					s, status := f.pl.Score(ctx, st, pod, nodeInfo(n))
					if !status.IsSuccess() {
						t.Fatal(status)
					}
					scores = append(scores, fwk.NodeScore{Name: n, Score: s})
				}
				if s := f.pl.NormalizeScore(ctx, st, pod, scores); !s.IsSuccess() {
					t.Fatal(s)
				}
				return scores
			}
			// The extender's computation (routes prioritize).
			want := func(order []string) []int64 {
				pol := f.pl.cache.ForPod(f.pl.pol)
				req, _ := f.pl.res.PodRequest(pod)
				sc := policy.NewScorer(pol, req, policy.Host{})
				rates, fits := make([]float64, len(order)), make([]bool, len(order))
				f.pl.cache.ViewEach(order, nil, func(i int, node policy.Node) { rates[i], fits[i] = sc.Score(node) })
				return policy.NormalizeScores(rates, fits)
			}
			check := func(st fwk.CycleState, order []string) {
				t.Helper()
				got, w := scoreList(st, order), want(order)
				for i := range order {
					if got[i].Score != w[i]*10 || got[i].Score < fwk.MinNodeScore || got[i].Score > fwk.MaxNodeScore {
						t.Fatalf("node %s scores %d, want the extender's %d ×10", order[i], got[i].Score, w[i])
					}
				}
			}
			reversed := slices.Clone(names)
			slices.Reverse(reversed)
			// PreScore's rates, then (handed back to the pool) rated afresh in another order
			// and in the first order again.
			for _, order := range [][]string{names, reversed, names} {
				check(st, order)
			}
			// A clone does not share PreScore's rates: it rates afresh, and the original
			// still ranks from its own.
			if s := f.pl.PreScore(ctx, st, pod, infos); !s.IsSuccess() {
				t.Fatal(s)
			}
			clone := st.Clone()
			check(clone, names)
			check(st, names)
		})
	}
}

func TestPodsWithoutGPUMem(t *testing.T) {
	f := start(t, &GPUShareArgs{Policy: "binpack"}, ct.Node("n1", 16))
	pod := ct.Pod("cpu", 0)
	ctx := context.Background()
	st, _, status := f.prefilter(t, pod)
	if !status.IsSkip() {
		t.Fatalf("PreFilter = %v, want Skip", status)
	}
	if s := f.pl.PreScore(ctx, st, pod, nil); !s.IsSkip() {
		t.Fatalf("PreScore = %v, want Skip (binpack does not score them)", s)
	}
	if s := f.pl.Reserve(ctx, st, pod, "n1"); !s.IsSuccess() {
		t.Fatalf("Reserve = %v", s)
	}
	if s := f.pl.Bind(ctx, st, pod, "n1"); !s.IsSkip() {
		t.Fatalf("Bind = %v, want Skip (DefaultBinder binds it)", s)
	}
}

// TestMemLimitPods: PreFilter refuses everywhere a pod whose limit annotation does not read,
// and one that names a limit for a container without gpu-mem (a pod of claims, say), rather
// than skip it; Filter refuses a pod with a limit on a node that does not enforce limits.
func TestMemLimitPods(t *testing.T) {
	f := start(t, &GPUShareArgs{Policy: "binpack"}, ct.Node("n1", 16))
	bad := ct.Pod("bad", 4)
	bad.Annotations = map[string]string{gpushare.AnnotationMemLimit: "main=2"}
	cpu := ct.Pod("cpu", 0)
	cpu.Annotations = map[string]string{gpushare.AnnotationMemLimit: "main=2"}
	for _, pod := range []*v1.Pod{bad, cpu} {
		if _, _, status := f.prefilter(t, pod); status.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(status.Message(), gpushare.AnnotationMemLimit) {
			t.Errorf("pod %s: PreFilter = %v, want UnschedulableAndUnresolvable naming %s", pod.Name, status, gpushare.AnnotationMemLimit)
		}
	}
	burst := ct.Pod("burst", 4)
	burst.Annotations = map[string]string{gpushare.AnnotationMemLimit: "main=8"}
	st, _, status := f.prefilter(t, burst)
	if !status.IsSuccess() {
		t.Fatalf("PreFilter = %v", status)
	}
	if s := f.pl.Filter(context.Background(), st, burst, nodeInfo("n1")); s.IsSuccess() || !strings.Contains(s.Message(), "only nodes labelled gpushare.io/isolation=limit") {
		t.Errorf("Filter on an unlabelled node = %v, want a refusal saying only limit nodes enforce it", s)
	}
}

// TestComputeSharePods: PreFilter refuses everywhere a pod whose compute share does not
// read; Filter refuses a pod with a share on a node not labelled mps, naming the label, and
// passes it on an mps node.
func TestComputeSharePods(t *testing.T) {
	mps := ct.Node("mps", 16)
	mps.Labels[gpushare.LabelIsolation] = "mps"
	f := start(t, &GPUShareArgs{Policy: "binpack"}, ct.Node("n1", 16), mps)
	bad := ct.Pod("bad", 4)
	bad.Annotations = map[string]string{gpushare.AnnotationComputeShare: "main=101"}
	if _, _, status := f.prefilter(t, bad); status.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(status.Message(), gpushare.AnnotationComputeShare) {
		t.Errorf("PreFilter = %v, want UnschedulableAndUnresolvable naming %s", status, gpushare.AnnotationComputeShare)
	}
	core := ct.Pod("core", 4)
	core.Annotations = map[string]string{gpushare.AnnotationComputeShare: "main=25"}
	st, _, status := f.prefilter(t, core)
	if !status.IsSuccess() {
		t.Fatalf("PreFilter = %v", status)
	}
	if s := f.pl.Filter(context.Background(), st, core, nodeInfo("n1")); s.IsSuccess() || !strings.Contains(s.Message(), "only nodes labelled gpushare.io/isolation=mps") {
		t.Errorf("Filter on an unlabelled node = %v, want a refusal saying only mps nodes enforce it", s)
	}
	if s := f.pl.Filter(context.Background(), st, core, nodeInfo("mps")); !s.IsSuccess() {
		t.Errorf("Filter on an mps node = %v, want success", s)
	}
}

func TestReserveBindUnreserve(t *testing.T) {
	pod, other := ct.Pod("p", 12), ct.Pod("q", 12)
	f := start(t, nil, ct.Node("n1", 16), pod, other)
	ctx := context.Background()

	// Reserve holds the card: no other pod gets it while p binds.
	st, _, _ := f.prefilter(t, pod)
	if s := f.pl.Reserve(ctx, st, pod, "n1"); !s.IsSuccess() {
		t.Fatalf("Reserve = %v", s)
	}
	if got := f.cards("n1"); got != "0:12/16" {
		t.Fatalf("after Reserve: %s, want 0:12/16", got)
	}
	st2, res, _ := f.prefilter(t, other)
	if s := f.pl.Filter(ctx, st2, other, nodeInfo("n1")); s.Code() != fwk.Unschedulable {
		t.Fatalf("second pod while the card is held: Filter = %v", s)
	}
	if res != nil {
		t.Fatalf("PreFilter restricted a pod holding nothing: %v", res.NodeNames)
	}

	// A new cycle of p while its Binding may still land is held to n1.
	_, res, _ = f.prefilter(t, pod)
	if res == nil || !res.NodeNames.Equal(sets.New("n1")) {
		t.Fatalf("PreFilter of a pod holding cards: %v, want only n1", res)
	}

	// Bind writes one Binding carrying the card annotations.
	if s := f.pl.Bind(ctx, st, pod, "n1"); !s.IsSuccess() {
		t.Fatalf("Bind = %v", s)
	}
	got, err := f.client.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	alloc, ok, err := gpushare.DefaultResources().ReadAllocation(got)
	if got.Spec.NodeName != "n1" || !ok || err != nil || alloc.CardUsage(got)[0] != 12 {
		t.Fatalf("bound pod: node %q, allocation %v (%v, %v)", got.Spec.NodeName, alloc, ok, err)
	}
	if u := got.Annotations[gpushare.AnnotationUnit]; u != "GiB" {
		t.Errorf("bound pod's %s = %q, want the node's unit GiB", gpushare.AnnotationUnit, u)
	}
	// Unreserve after a successful Bind changes nothing.
	f.pl.Unreserve(ctx, st, pod, "n1")
	ct.Eventually(t, "bound pod counted", func() bool { return f.cards("n1") == "0:12/16" })

	// Unreserve before Bind frees the card.
	f2 := start(t, nil, ct.Node("n1", 16), pod.DeepCopy())
	st, _, _ = f2.prefilter(t, pod)
	if s := f2.pl.Reserve(ctx, st, pod, "n1"); !s.IsSuccess() {
		t.Fatal(s)
	}
	f2.pl.Unreserve(ctx, st, pod, "n1")
	if got := f2.cards("n1"); got != "0:0/16" {
		t.Fatalf("after Unreserve: %s, want 0:0/16", got)
	}
}

package routes_test

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/gpushare"
)

func filterFixture(t *testing.T) *fixture {
	return newFixture(t,
		// 2 cards of 16 GiB with 8 free each: 16 free on the node, never 10 on one card
		ct.Node("half", 16, 16),
		ct.Placed(ct.Pod("h0", 8), "half", gpushare.CardUnits{0: 8}),
		ct.Placed(ct.Pod("h1", 8), "half", gpushare.CardUnits{1: 8}),
		ct.Node("empty", 16, 16),
		ct.BareNode("nogpu"),
	)
}

func TestFilter(t *testing.T) {
	f := filterFixture(t)
	invalid := ct.Pod("bad", 10)
	ct.SetGPU(&invalid.Spec.Containers[0], 10, 3)
	const notGPU = "not a gpushare node (no cgpu=true label or no gpu-mem)"
	tests := []struct {
		name            string
		pod             *corev1.Pod
		nodes           []string
		wantPass        []string
		wantFailed      extenderv1.FailedNodesMap
		wantUnresolvabl extenderv1.FailedNodesMap
	}{
		{
			name: "10 GiB rejected on 2x16 with 8 free each", pod: ct.Pod("p", 10),
			nodes: []string{"half", "empty", "nogpu", "unknown"}, wantPass: []string{"empty"},
			wantFailed: extenderv1.FailedNodesMap{
				"half": "gpu-mem: need 10 on one card; largest free 8 (card0 8/16, card1 8/16)"},
			wantUnresolvabl: extenderv1.FailedNodesMap{"nogpu": notGPU, "unknown": notGPU},
		},
		{
			name: "8 fits both", pod: ct.Pod("p", 8), nodes: []string{"half", "empty"},
			wantPass: []string{"half", "empty"},
		},
		{
			name: "invalid request fails every node with the validation text", pod: invalid,
			nodes: []string{"half", "empty"}, wantPass: []string{},
			wantUnresolvabl: extenderv1.FailedNodesMap{
				"half":  `container "main": aliyun.com/gpu-mem 10 is not divisible by aliyun.com/gpu-count 3 (each card gets an equal share)`,
				"empty": `container "main": aliyun.com/gpu-mem 10 is not divisible by aliyun.com/gpu-count 3 (each card gets an equal share)`,
			},
		},
		{
			name: "pod without gpu-mem passes everywhere", pod: ct.Pod("cpu", 0),
			nodes: []string{"half", "unknown"}, wantPass: []string{"half", "unknown"},
		},
	}
	for _, tc := range tests {
		if tc.wantFailed == nil {
			tc.wantFailed = extenderv1.FailedNodesMap{}
		}
		if tc.wantUnresolvabl == nil {
			tc.wantUnresolvabl = extenderv1.FailedNodesMap{}
		}
		t.Run(tc.name+"/NodeNames", func(t *testing.T) {
			got := f.filter(t, tc.pod, tc.nodes)
			want := extenderv1.ExtenderFilterResult{NodeNames: &tc.wantPass, FailedNodes: tc.wantFailed, FailedAndUnresolvableNodes: tc.wantUnresolvabl}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
		t.Run(tc.name+"/Nodes", func(t *testing.T) {
			list := &corev1.NodeList{}
			for _, n := range tc.nodes {
				list.Items = append(list.Items, corev1.Node{ObjectMeta: ct.BareNode(n).ObjectMeta})
			}
			rec := f.do(t, http.MethodPost, "/gpushare-scheduler/filter", extenderv1.ExtenderArgs{Pod: tc.pod, Nodes: list})
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			var got extenderv1.ExtenderFilterResult
			decodeInto(t, rec, &got)
			if got.NodeNames != nil {
				t.Errorf("answered NodeNames %v to a Nodes request", *got.NodeNames)
			}
			var gotNames []string
			if got.Nodes != nil {
				for _, n := range got.Nodes.Items {
					gotNames = append(gotNames, n.Name)
					if n.Labels[gpushare.NodeLabelKey] != gpushare.NodeLabelValue {
						t.Errorf("node %s came back without its labels", n.Name)
					}
				}
			}
			if d := cmp.Diff(tc.wantPass, gotNames, cmpEmptyEqual); d != "" {
				t.Errorf("passing nodes (-want,+got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantFailed, got.FailedNodes); d != "" {
				t.Errorf("FailedNodes (-want,+got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantUnresolvabl, got.FailedAndUnresolvableNodes); d != "" {
				t.Errorf("FailedAndUnresolvableNodes (-want,+got):\n%s", d)
			}
		})
	}
}

var cmpEmptyEqual = cmp.FilterValues(func(a, b []string) bool { return len(a) == 0 && len(b) == 0 }, cmp.Ignore())

func TestPrioritize(t *testing.T) {
	f := filterFixture(t)
	names := []string{"half", "empty", "nogpu", "unknown"}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want extenderv1.HostPriorityList
	}{
		{
			// binpack rate = 0.75*chosen-card fullness + 0.25*node fullness, after placing; the
			// best node gets 10, the others 9*(rate-min)/(max-min) (policy.NormalizeScores):
			// half:  card0 12/16=0.75, node 20/32=0.625 → 0.71875 (best) → 10
			// empty: card0  4/16=0.25, node  4/32=0.125 → 0.21875 (min)  → 0
			name: "4 GiB", pod: ct.Pod("p", 4),
			// (nodes scoring 0 are left out of the answer; see prioritize)
			want: extenderv1.HostPriorityList{{Host: "half", Score: 10}},
		},
		{
			// half: 10 does not fit → 0; empty is the only (so the best) node → 10
			name: "10 GiB", pod: ct.Pod("p", 10),
			want: extenderv1.HostPriorityList{{Host: "empty", Score: 10}},
		},
		{
			name: "no gpu-mem scores 0 everywhere", pod: ct.Pod("p", 0),
			// (no node above 0: every node listed, for the scheduler's random tie-break)
			want: extenderv1.HostPriorityList{{Host: "half"}, {Host: "empty"}, {Host: "nogpu"}, {Host: "unknown"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, f.prioritize(t, tc.pod, names)); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}

// TestFilterIsolation: the extender rejects, as unresolvable, a pod with a container on two
// cards on an MPS node and every GPU pod on a node whose isolation label is invalid, and
// counts them under reason "isolation".
func TestFilterIsolation(t *testing.T) {
	labelled := func(name, mode string) *corev1.Node {
		n := ct.Node(name, 16, 16)
		n.Labels[gpushare.LabelIsolation] = mode
		return n
	}
	f := newFixture(t, labelled("mps", "mps"), labelled("typo", "mps "), ct.Node("plain", 16, 16))
	two := ct.Pod("two", 16)
	ct.SetGPU(&two.Spec.Containers[0], 16, 2)
	const typo = `node refuses GPU pods until its isolation label is fixed: node label gpushare.io/isolation="mps ": want none, mps or limit`
	tests := []struct {
		name            string
		pod             *corev1.Pod
		wantPass        []string
		wantUnresolvabl extenderv1.FailedNodesMap
	}{
		{"one card per container", ct.Pod("one", 8), []string{"mps", "plain"}, extenderv1.FailedNodesMap{"typo": typo}},
		{"two cards", two, []string{"plain"}, extenderv1.FailedNodesMap{
			"mps":  `node isolates cards with MPS (gpushare.io/isolation=mps): one card per container, and container "main" asks for 2`,
			"typo": typo,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			names := []string{"mps", "typo", "plain"}
			rec := f.do(t, http.MethodPost, "/gpushare-scheduler/filter", extenderv1.ExtenderArgs{Pod: tc.pod, NodeNames: &names})
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			var got extenderv1.ExtenderFilterResult
			decodeInto(t, rec, &got)
			want := extenderv1.ExtenderFilterResult{NodeNames: &tc.wantPass, FailedNodes: extenderv1.FailedNodesMap{}, FailedAndUnresolvableNodes: tc.wantUnresolvabl}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
	// typo twice, mps once
	if got := f.counter(t, "gpushare_filter_rejections_total", "isolation"); got != 3 {
		t.Errorf("gpushare_filter_rejections_total{reason=isolation} = %v, want 3", got)
	}
}

// TestFilterMemLimit: a pod whose container has a memory limit above its request passes only
// limit nodes, whose largest card holds the limit; none and mps nodes fail it as
// unresolvable, naming the annotation; a malformed limit fails every node with the parse
// error, counted as an invalid request.
func TestFilterMemLimit(t *testing.T) {
	labelled := func(name, mode string) *corev1.Node {
		n := ct.Node(name, 16, 16)
		n.Labels[gpushare.LabelIsolation] = mode
		return n
	}
	f := newFixture(t, labelled("limit", "limit"), labelled("mps", "mps"), ct.Node("plain", 16, 16))
	limited := func(v string) *corev1.Pod {
		p := ct.Pod("burst", 4)
		p.Annotations = map[string]string{gpushare.AnnotationMemLimit: v}
		return p
	}
	notEnforced := `container "main" has a GPU-memory limit (gpushare.io/gpu-mem-limit: 12 above its request 4), which only nodes labelled gpushare.io/isolation=limit enforce, and this node is `
	bad := `annotation gpushare.io/gpu-mem-limit: container "main": limit 3 is below its gpu-mem request 4`
	tests := []struct {
		name            string
		pod             *corev1.Pod
		wantPass        []string
		wantUnresolvabl extenderv1.FailedNodesMap
	}{
		{"a limit", limited("main=12"), []string{"limit"}, extenderv1.FailedNodesMap{"mps": notEnforced + "mps", "plain": notEnforced + "none"}},
		{"above every card", limited("main=20"), []string{}, extenderv1.FailedNodesMap{
			"limit": `container "main" has a GPU-memory limit of 20 units per card (gpushare.io/gpu-mem-limit), above this node's largest card (16 units)`,
			"mps":   `container "main" has a GPU-memory limit (gpushare.io/gpu-mem-limit: 20 above its request 4), which only nodes labelled gpushare.io/isolation=limit enforce, and this node is mps`,
			"plain": `container "main" has a GPU-memory limit (gpushare.io/gpu-mem-limit: 20 above its request 4), which only nodes labelled gpushare.io/isolation=limit enforce, and this node is none`,
		}},
		{"below the request", limited("main=3"), []string{}, extenderv1.FailedNodesMap{"limit": bad, "mps": bad, "plain": bad}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			names := []string{"limit", "mps", "plain"}
			rec := f.do(t, http.MethodPost, "/gpushare-scheduler/filter", extenderv1.ExtenderArgs{Pod: tc.pod, NodeNames: &names})
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			var got extenderv1.ExtenderFilterResult
			decodeInto(t, rec, &got)
			want := extenderv1.ExtenderFilterResult{NodeNames: &tc.wantPass, FailedNodes: extenderv1.FailedNodesMap{}, FailedAndUnresolvableNodes: tc.wantUnresolvabl}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}

// TestFilterComputeShare: a pod with a compute share passes only mps nodes; other nodes fail
// it as unresolvable, naming the annotation; a malformed share fails every node with the
// parse error; on an mps node whose one card holds memory-only grants it fails, naming the
// card.
func TestFilterComputeShare(t *testing.T) {
	labelled := func(name, mode string, cards ...int64) *corev1.Node {
		n := ct.Node(name, cards...)
		n.Labels[gpushare.LabelIsolation] = mode
		return n
	}
	full := ct.Placed(ct.Pod("m", 4), "mpsfull", gpushare.CardUnits{0: 4})
	f := newFixture(t, labelled("mps", "mps", 16, 16), labelled("mpsfull", "mps", 16), labelled("limit", "limit", 16), ct.Node("plain", 16, 16), full)
	sharing := func(v string) *corev1.Pod {
		p := ct.Pod("core", 4)
		p.Annotations = map[string]string{gpushare.AnnotationComputeShare: v}
		return p
	}
	notEnforced := `container "main" has a compute share (gpushare.io/gpu-core: 25 percent), which only nodes labelled gpushare.io/isolation=mps enforce, and this node is `
	bad := `annotation gpushare.io/gpu-core: entry "main=23": compute share "23": want 5..100 in steps of 5`
	tests := []struct {
		name            string
		pod             *corev1.Pod
		wantPass        []string
		wantUnresolvabl extenderv1.FailedNodesMap
	}{
		{"a share", sharing("main=25"), []string{"mps"}, extenderv1.FailedNodesMap{
			"limit":   notEnforced + "limit",
			"plain":   notEnforced + "none",
			"mpsfull": "no card with 25 percent compute free and no memory-only grants (gpushare.io/gpu-core): card0 holds memory-only grants",
		}},
		{"off the steps", sharing("main=23"), []string{}, extenderv1.FailedNodesMap{"limit": bad, "mps": bad, "mpsfull": bad, "plain": bad}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			names := []string{"mps", "mpsfull", "limit", "plain"}
			rec := f.do(t, http.MethodPost, "/gpushare-scheduler/filter", extenderv1.ExtenderArgs{Pod: tc.pod, NodeNames: &names})
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			var got extenderv1.ExtenderFilterResult
			decodeInto(t, rec, &got)
			want := extenderv1.ExtenderFilterResult{NodeNames: &tc.wantPass, FailedNodes: extenderv1.FailedNodesMap{}, FailedAndUnresolvableNodes: tc.wantUnresolvabl}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}

// TestFilterInventoryOutOfRange: a node publishing a card of 9e18 units fails every GPU pod
// as unresolvable, with the reason kubectl describe shows naming the value, counted under
// reason "inventory_out_of_range"; the other node still takes the pod.
func TestFilterInventoryOutOfRange(t *testing.T) {
	f := newFixture(t, ct.Node("huge", 9_000_000_000_000_000_000), ct.Node("plain", 16))
	names := []string{"huge", "plain"}
	rec := f.do(t, http.MethodPost, "/gpushare-scheduler/filter", extenderv1.ExtenderArgs{Pod: ct.Pod("p", 4), NodeNames: &names})
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var got extenderv1.ExtenderFilterResult
	decodeInto(t, rec, &got)
	want := extenderv1.ExtenderFilterResult{NodeNames: &[]string{"plain"}, FailedNodes: extenderv1.FailedNodesMap{},
		FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{"huge": "node's GPU inventory is out of range, it takes no GPU pod until fixed: " +
			"annotation gpushare.io/gpu-inventory: card 0 units 9000000000000000000 out of range 0..4294967296"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want,+got):\n%s", d)
	}
	if n := f.counter(t, "gpushare_filter_rejections_total", "inventory_out_of_range"); n != 1 {
		t.Errorf("gpushare_filter_rejections_total{reason=inventory_out_of_range} = %v, want 1", n)
	}
}

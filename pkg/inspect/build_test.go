package inspect

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

func TestPercent(t *testing.T) {
	tests := []struct {
		name        string
		part, whole int64
		want        int64
	}{
		{name: "reference: 12/14 = 85.7 floors to 85", part: 12, whole: 14, want: 85},
		{name: "9/30 = 30", part: 9, whole: 30, want: 30},
		{name: "full", part: 16, whole: 16, want: 100},
		{name: "over-committed: 20/16 = 125", part: 20, whole: 16, want: 125},
		{name: "no capacity", part: 4, whole: 0, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := percent(tc.part, tc.whole); got != tc.want {
				t.Errorf("percent(%d, %d) = %d, want %d", tc.part, tc.whole, got, tc.want)
			}
		})
	}
}

func TestTotals(t *testing.T) {
	mib := gpushare.Unit{MiB: 1}
	tests := []struct {
		name  string
		nodes []nodeUsage
		want  sums
	}{
		{name: "no nodes", want: sums{Unit: gpushare.GiB}},
		{
			// 4+8 / 14+16 = 12/30 → 40%
			name:  "same unit",
			nodes: []nodeUsage{{Unit: gpushare.GiB, Allocated: 4, Total: 14}, {Unit: gpushare.GiB, Allocated: 8, Total: 16}},
			want:  sums{Unit: gpushare.GiB, Allocated: 12, Total: 30, Percent: 40},
		},
		{
			// GiB + MiB sum in MiB: 4*1024+4096 = 8192 / 14*1024+15079 = 29415 → 27%
			name:  "GiB and MiB",
			nodes: []nodeUsage{{Unit: gpushare.GiB, Allocated: 4, Total: 14}, {Unit: mib, Allocated: 4096, Total: 15079}},
			want:  sums{Unit: mib, Allocated: 8192, Total: 29415, Percent: 27},
		},
		{
			// GiB and 256MiB sum in 256MiB: 2*4+3 = 11 / 14*4+60 = 116 → 9%
			name:  "GiB and 256MiB",
			nodes: []nodeUsage{{Unit: gpushare.GiB, Allocated: 2, Total: 14}, {Unit: gpushare.Unit{MiB: 256}, Allocated: 3, Total: 60}},
			want:  sums{Unit: gpushare.Unit{MiB: 256}, Allocated: 11, Total: 116, Percent: 9},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, totals(tc.nodes)); diff != "" {
				t.Errorf("totals (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestBuildPod checks each way a pod's placement is read.
func TestBuildPod(t *testing.T) {
	res := gpushare.DefaultResources()
	tests := []struct {
		name   string
		pod    *corev1.Pod
		want   podUsage
		wantOK bool
		warn   bool
	}{
		{
			name:   "per-container JSON",
			pod:    makePod("ns", "p").GPU(4, 0).Alloc(`{"0":{"1":4}}`).Obj(),
			want:   podUsage{Name: "p", Namespace: "ns", Cards: []podCard{{Index: 1, Allocated: 4}}, Allocated: 4},
			wantOK: true,
		},
		{
			name:   "old single-card index",
			pod:    makePod("ns", "p").GPU(3, 0).GPU(2, 0).Index("1").Obj(),
			want:   podUsage{Name: "p", Namespace: "ns", Cards: []podCard{{Index: 1, Allocated: 5}}, Allocated: 5},
			wantOK: true,
		},
		{
			// JSON wins over IDX when both are present (the extender writes both).
			name:   "JSON before IDX",
			pod:    makePod("ns", "p").GPU(8, 2).Alloc(`{"0":{"0":4,"2":4}}`).Index("0").Obj(),
			want:   podUsage{Name: "p", Namespace: "ns", Cards: []podCard{{Index: 0, Allocated: 4}, {Index: 2, Allocated: 4}}, Allocated: 8},
			wantOK: true,
		},
		{
			name:   "bound without annotation: pending",
			pod:    makePod("ns", "p").GPU(6, 0).Obj(),
			want:   podUsage{Name: "p", Namespace: "ns", Cards: []podCard{}, PendingAllocated: 6, Allocated: 6},
			wantOK: true,
		},
		{
			name: "no gpu-mem: skipped",
			pod:  makePod("ns", "p").Obj(),
		},
		{
			name:   "bad IDX with a request: pending, warned",
			pod:    makePod("ns", "p").GPU(2, 0).Index("x").Obj(),
			want:   podUsage{Name: "p", Namespace: "ns", Cards: []podCard{}, PendingAllocated: 2, Allocated: 2},
			wantOK: true,
			warn:   true,
		},
		{
			name: "bad request without annotation: skipped, warned",
			pod:  makePod("ns", "p").GPU(3, 2).Obj(),
			warn: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, warn, ok := buildPod(tc.pod, res)
			if ok != tc.wantOK || (warn != "") != tc.warn {
				t.Fatalf("ok=%v warn=%q, want ok=%v warned=%v", ok, warn, tc.wantOK, tc.warn)
			}
			if !ok {
				return
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreUnexported(podUsage{})); diff != "" {
				t.Errorf("pod (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestBuildSkipsAndDeduplicates: buildModel ignores non-sharing nodes, finished and unbound pods,
// pods of other nodes, and counts a pod listed twice once.
func TestBuildSkipsAndDeduplicates(t *testing.T) {
	nodes := []corev1.Node{
		*makeNode("gpu", "10.0.0.1").Sharing().Inventory(t, gpushare.GiB, card(0, 16, true)).Obj(),
		*makeNode("cpu", "10.0.0.2").Obj(),
	}
	p := *makePod("ns", "a").Node("gpu").GPU(4, 0).Index("0").Obj()
	pods := []corev1.Pod{
		p, p, // listed twice
		*makePod("ns", "done").Node("gpu").GPU(4, 0).Index("0").Phase(corev1.PodFailed).Obj(),
		*makePod("ns", "unbound").GPU(4, 0).Phase(corev1.PodPending).Obj(),
		*makePod("ns", "elsewhere").Node("cpu").GPU(4, 0).Index("0").Obj(),
	}
	m := buildModel(nodes, pods, draObjects{}, gpushare.DefaultResources())
	want := model{
		Nodes: []nodeUsage{{
			Name: "gpu", IPAddress: "10.0.0.1", Unit: gpushare.GiB, InventorySource: gpushare.FromAnnotation,
			Cards:     []cardUsage{{Index: 0, UUID: "GPU-a", Model: "Tesla V100", Total: 16, Allocated: 4, Healthy: true}},
			Allocated: 4, Total: 16, Percent: 25,
			Pods:      []podUsage{{Name: "a", Namespace: "ns", Cards: []podCard{{Index: 0, Allocated: 4}}, Allocated: 4}},
			Isolation: "none",
		}},
		Totals: sums{Unit: gpushare.GiB, Allocated: 4, Total: 16, Percent: 25},
	}
	if diff := cmp.Diff(want, m, cmpopts.IgnoreUnexported(podUsage{})); diff != "" {
		t.Errorf("model (-want,+got):\n%s", diff)
	}
}

func TestNodeAddress(t *testing.T) {
	tests := []struct {
		name  string
		addrs []corev1.NodeAddress
		want  string
	}{
		{name: "InternalIP preferred", addrs: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "h"}, {Type: corev1.NodeInternalIP, Address: "10.1.1.1"}}, want: "10.1.1.1"},
		{name: "else the first", addrs: []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "1.2.3.4"}}, want: "1.2.3.4"},
		{name: "none", want: "unknown"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := &corev1.Node{Status: corev1.NodeStatus{Addresses: tc.addrs}}
			if got := nodeAddress(n); got != tc.want {
				t.Errorf("nodeAddress = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestIsolationEnforced: inspect warns when share-plugin says the node cannot enforce the
// isolation its label asks for.
func TestIsolationEnforced(t *testing.T) {
	tests := []struct {
		name      string
		labels    map[string]string
		want      string
		wantWarns int
	}{
		{"no label", nil, "none", 0},
		{"limit, enforced", map[string]string{gpushare.LabelIsolation: "limit", gpushare.LabelIsolationEnforced: "limit"}, "limit", 0},
		{"limit, not published yet", map[string]string{gpushare.LabelIsolation: "limit"}, "limit", 0},
		{"limit, not enforced", map[string]string{gpushare.LabelIsolation: "limit", gpushare.LabelIsolationEnforced: "none"}, "limit", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var warns []string
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: tc.labels}}
			got, _ := isolation(node, &warns)
			if got != tc.want || len(warns) != tc.wantWarns {
				t.Errorf("isolation = %q, warnings %q; want %q with %d warnings", got, warns, tc.want, tc.wantWarns)
			}
			if tc.wantWarns > 0 && !strings.Contains(warns[0], "isolation limit is not enforced") {
				t.Errorf("warning %q does not say the mode is not enforced", warns[0])
			}
		})
	}
}

package schedulerplugin

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"

	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/gpushare"
)

// annotated is ct.Pod with annotations.
func annotated(name string, mem int64, ann map[string]string) *v1.Pod {
	p := ct.Pod(name, mem)
	p.Annotations = ann
	return p
}

// mixedNode has a T4 (card 0, 16 units, 4 free) and an A100 (card 1, 40 units, 20 free).
func mixedNode() *v1.Node {
	return ct.NodeWith("mixed",
		gpushare.Device{Index: 0, UUID: "GPU-t4", Model: "Tesla T4", Units: 16, Healthy: true},
		gpushare.Device{Index: 1, UUID: "GPU-a100", Model: "NVIDIA A100-PCIE-40GB", Units: 40, Healthy: true})
}

// TestCardChoice: the framework plugin honours card annotations in PreFilter, Filter, PreScore
// and Reserve/Bind as the extender does, and refuses to batch pods that carry them.
func TestCardChoice(t *testing.T) {
	tests := []struct {
		name          string
		ann           map[string]string
		mem           int64
		wantPreFilter fwk.Code
		wantFilter    fwk.Code
		wantReason    string
		wantAlloc     string // after Reserve and Bind on mixed
	}{
		{name: "no annotations: binpack's fullest card", mem: 4, wantAlloc: `{"0":{"0":4}}`},
		{name: "A100", mem: 4, ann: map[string]string{gpushare.AnnotationHAMiUseGPUType: "A100"}, wantAlloc: `{"0":{"1":4}}`},
		{name: "spread", mem: 4, ann: map[string]string{gpushare.AnnotationCardPolicy: "spread"}, wantAlloc: `{"0":{"1":4}}`},
		{
			name: "T4 too full", mem: 8, ann: map[string]string{gpushare.AnnotationUseGPUUUID: "GPU-t4"},
			wantFilter: fwk.Unschedulable, wantReason: "gpu-mem: no card with UUID GPU-t4 with 8 free units (card0 4/16)",
		},
		{
			name: "no such type", mem: 4, ann: map[string]string{gpushare.AnnotationUseGPUType: "H100"},
			wantFilter: fwk.UnschedulableAndUnresolvable,
			wantReason: "gpu-mem: no card of type H100 on this node (its cards: Tesla T4, NVIDIA A100-PCIE-40GB)",
		},
		{
			name: "invalid", mem: 4, ann: map[string]string{gpushare.AnnotationHAMiUseGPUType: ","},
			wantPreFilter: fwk.UnschedulableAndUnresolvable,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := annotated("p", tc.mem, tc.ann)
			f := start(t, &GPUShareArgs{Policy: "binpack"}, mixedNode(), pod,
				ct.Placed(ct.Pod("h0", 12), "mixed", gpushare.CardUnits{0: 12}),
				ct.Placed(ct.Pod("h1", 20), "mixed", gpushare.CardUnits{1: 20}))
			ctx := context.Background()
			st, _, status := f.prefilter(t, pod)
			if status.Code() != tc.wantPreFilter {
				t.Fatalf("PreFilter = %v, want %v", status, tc.wantPreFilter)
			}
			if tc.wantPreFilter != fwk.Success {
				return
			}
			if _, s := f.pl.SignPod(ctx, pod); tc.ann != nil && s.Code() != fwk.Unschedulable {
				t.Errorf("SignPod of a pod with card annotations = %v, want Unschedulable", s)
			}
			got := f.pl.Filter(ctx, st, pod, nodeInfo("mixed"))
			if got.Code() != tc.wantFilter || got.Message() != tc.wantReason {
				t.Fatalf("Filter = %v %q, want %v %q", got.Code(), got.Message(), tc.wantFilter, tc.wantReason)
			}
			if s := f.pl.PreScore(ctx, st, pod, []fwk.NodeInfo{nodeInfo("mixed")}); !s.IsSuccess() {
				t.Fatalf("PreScore = %v", s)
			}
			if fits := readStateFits(t, st); fits != (tc.wantFilter == fwk.Success) {
				t.Fatalf("PreScore fits %v, want %v", fits, tc.wantFilter == fwk.Success)
			}
			if tc.wantFilter != fwk.Success {
				return
			}
			if s := f.pl.Reserve(ctx, st, pod, "mixed"); !s.IsSuccess() {
				t.Fatalf("Reserve = %v", s)
			}
			if s := f.pl.Bind(ctx, st, pod, "mixed"); !s.IsSuccess() {
				t.Fatalf("Bind = %v", s)
			}
			bound, err := f.client.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := bound.Annotations[gpushare.AnnotationAllocation]; got != tc.wantAlloc {
				t.Errorf("allocation %s, want %s", got, tc.wantAlloc)
			}
		})
	}
}

// readStateFits is whether PreScore found the pod fitting the one node it rated.
func readStateFits(t *testing.T, st fwk.CycleState) bool {
	t.Helper()
	s, err := readState(st)
	if err != nil || s.scores == nil || len(s.scores.fits) != 1 {
		t.Fatalf("PreScore left no rates: %v", err)
	}
	return s.scores.fits[0]
}

package routes_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/gpushare"
)

// cardChoiceCluster: node "mixed" has T4 cards 0 (16 free) and 1 (4 free) and an A100,
// card 2 (20 free); node "t4" has two empty T4s. Without card annotations binpack puts 4
// units on mixed's card 1.
func cardChoiceCluster(pods ...*corev1.Pod) []runtime.Object {
	t4 := func(i int) gpushare.Device {
		return gpushare.Device{Index: i, UUID: "GPU-t4-" + string(rune('0'+i)), Model: "Tesla T4", Units: 16, Healthy: true}
	}
	a100 := gpushare.Device{Index: 2, UUID: "GPU-a100", Model: "NVIDIA A100-PCIE-40GB", Units: 40, Healthy: true}
	objs := []runtime.Object{
		ct.NodeWith("mixed", t4(0), t4(1), a100),
		ct.NodeWith("t4", t4(0), t4(1)),
		ct.Placed(ct.Pod("h1", 12), "mixed", gpushare.CardUnits{1: 12}),
		ct.Placed(ct.Pod("h2", 20), "mixed", gpushare.CardUnits{2: 20}),
	}
	for _, p := range pods {
		objs = append(objs, p)
	}
	return objs
}

// annotated is ct.Pod with annotations.
func annotated(name string, mem int64, ann map[string]string) *corev1.Pod {
	p := ct.Pod(name, mem)
	p.Annotations = ann
	return p
}

func TestFilterCardChoice(t *testing.T) {
	f := newFixture(t, cardChoiceCluster()...)
	names := []string{"mixed", "t4"}
	tests := []struct {
		name            string
		pod             *corev1.Pod
		wantPass        []string
		wantFailed      extenderv1.FailedNodesMap
		wantUnresolvabl extenderv1.FailedNodesMap
	}{
		{
			name: "A100 only on mixed", pod: annotated("p", 8, map[string]string{gpushare.AnnotationHAMiUseGPUType: "A100"}),
			wantPass: []string{"mixed"},
			wantUnresolvabl: extenderv1.FailedNodesMap{
				"t4": "gpu-mem: no card of type A100 on this node (its cards: Tesla T4)"},
		},
		{
			name: "A100 too full", pod: annotated("p", 24, map[string]string{gpushare.AnnotationUseGPUType: "A100"}),
			wantPass: []string{},
			wantFailed: extenderv1.FailedNodesMap{
				"mixed": "gpu-mem: no card of type A100 with 24 free units (card2 20/40)"},
			wantUnresolvabl: extenderv1.FailedNodesMap{
				"t4": "gpu-mem: no card of type A100 on this node (its cards: Tesla T4)"},
		},
		{
			name: "avoiding a UUID", pod: annotated("p", 16, map[string]string{gpushare.AnnotationAvoidGPUUUID: "GPU-t4-0"}),
			wantPass: []string{"mixed", "t4"},
		},
		{
			name: "invalid card-policy fails every node", pod: annotated("p", 4, map[string]string{gpushare.AnnotationCardPolicy: "tight"}),
			wantPass: []string{},
			wantUnresolvabl: extenderv1.FailedNodesMap{
				"mixed": `annotation gpushare.io/card-policy="tight": want binpack or spread`,
				"t4":    `annotation gpushare.io/card-policy="tight": want binpack or spread`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.wantFailed == nil {
				tc.wantFailed = extenderv1.FailedNodesMap{}
			}
			if tc.wantUnresolvabl == nil {
				tc.wantUnresolvabl = extenderv1.FailedNodesMap{}
			}
			got := f.filter(t, tc.pod, names)
			want := extenderv1.ExtenderFilterResult{NodeNames: &tc.wantPass, FailedNodes: tc.wantFailed, FailedAndUnresolvableNodes: tc.wantUnresolvabl}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}

func TestPrioritizeCardChoice(t *testing.T) {
	f := newFixture(t, cardChoiceCluster()...)
	names := []string{"mixed", "t4"}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want extenderv1.HostPriorityList
	}{
		// binpack: mixed's card 1 ends full (rate 0.75+0.25*36/72), t4's card fills a quarter
		{name: "no annotations", pod: ct.Pod("p", 4), want: extenderv1.HostPriorityList{{Host: "mixed", Score: 10}}},
		// only t4 has cards of the type
		{name: "T4 avoided", pod: annotated("p", 4, map[string]string{gpushare.AnnotationAvoidGPUType: "t4"}),
			want: extenderv1.HostPriorityList{{Host: "mixed", Score: 10}}},
		// spread: the empty t4 node beats mixed, whose emptiest card is the A100's 20 of 40
		{name: "spread", pod: annotated("p", 4, map[string]string{gpushare.AnnotationCardPolicy: "spread"}),
			want: extenderv1.HostPriorityList{{Host: "t4", Score: 10}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, f.prioritize(t, tc.pod, names)); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}

func TestBindCardChoice(t *testing.T) {
	tests := []struct {
		name      string
		ann       map[string]string
		node      string // "": mixed
		wantAlloc string
		wantErr   string
	}{
		{name: "no annotations: binpack's fullest card", wantAlloc: `{"0":{"1":4}}`},
		{name: "use-gputype A100", ann: map[string]string{gpushare.AnnotationHAMiUseGPUType: "a100"}, wantAlloc: `{"0":{"2":4}}`},
		{name: "use-gpuuuid", ann: map[string]string{gpushare.AnnotationHAMiUseGPUUUID: "GPU-t4-0"}, wantAlloc: `{"0":{"0":4}}`},
		{name: "card-policy spread: the emptiest card", ann: map[string]string{gpushare.AnnotationCardPolicy: "spread"}, wantAlloc: `{"0":{"2":4}}`},
		{
			name:      "spread among T4s",
			ann:       map[string]string{gpushare.AnnotationCardPolicy: "spread", gpushare.AnnotationAvoidGPUType: "A100"},
			wantAlloc: `{"0":{"0":4}}`,
		},
		{
			name: "no card of the type on the node", ann: map[string]string{gpushare.AnnotationHAMiUseGPUType: "a100"}, node: "t4",
			wantErr: "choosing cards for pod default/p on t4: gpu-mem: no card of type a100 on this node (its cards: Tesla T4)",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, cardChoiceCluster(annotated("p", 4, tc.ann))...)
			p := f.pod(t, "p")
			node := tc.node
			if node == "" {
				node = "mixed"
			}
			res := f.bind(t, extenderv1.ExtenderBindingArgs{PodName: p.Name, PodNamespace: p.Namespace, PodUID: p.UID, Node: node})
			if res.Error != tc.wantErr {
				t.Fatalf("bind error %q, want %q", res.Error, tc.wantErr)
			}
			if got := f.pod(t, "p").Annotations[gpushare.AnnotationAllocation]; got != tc.wantAlloc {
				t.Errorf("allocation %s, want %s", got, tc.wantAlloc)
			}
		})
	}
}

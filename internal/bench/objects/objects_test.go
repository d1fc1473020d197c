package objects

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

var quantityEqual = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

func TestNodeBuild(t *testing.T) {
	res := gpushare.DefaultResources()
	base := Node{
		Name: "n1", Model: "T4", Cards: 2, CardUnits: 1000, Unit: gpushare.Unit{MiB: 15}, CardMemoryMiB: 15109,
		MilliCPU: 96000, MemoryMiB: 2048, MaxPods: 1000,
	}
	ready := base
	ready.Ready, ready.Labels, ready.Annotations = true, map[string]string{"set": "a"}, map[string]string{"kwok": "fake"}
	ready.Taints = []corev1.Taint{{Key: "burst", Effect: corev1.TaintEffectNoSchedule}}
	tests := []struct {
		name            string
		node            Node
		wantLabels      map[string]string
		wantAnnotations []string
		wantReady       bool
	}{
		{"plain", base, map[string]string{"cgpu": "true", LabelHostname: "n1", LabelGPUProduct: "T4"}, nil, false},
		{"extras, Ready, tainted", ready, map[string]string{"cgpu": "true", LabelHostname: "n1", LabelGPUProduct: "T4", "set": "a"}, []string{"kwok"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			node, err := tc.node.Build(res)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantLabels, node.Labels); diff != "" {
				t.Errorf("labels (-want,+got):\n%s", diff)
			}
			for _, k := range tc.wantAnnotations {
				if _, ok := node.Annotations[k]; !ok {
					t.Errorf("annotation %s missing: %v", k, node.Annotations)
				}
			}
			want := corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("96"), corev1.ResourceMemory: resource.MustParse("2Gi"),
				corev1.ResourcePods: resource.MustParse("1k"), res.Count: resource.MustParse("2"), res.Mem: resource.MustParse("2k"),
			}
			if diff := cmp.Diff(want, node.Status.Allocatable, quantityEqual); diff != "" {
				t.Errorf("allocatable (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(want, node.Status.Capacity, quantityEqual); diff != "" {
				t.Errorf("capacity (-want,+got):\n%s", diff)
			}
			// What the extender reads back.
			inv, src, err := res.NodeInventory(node)
			if err != nil || src != gpushare.FromAnnotation {
				t.Fatalf("inventory: %v from %s", err, src)
			}
			wantInv := gpushare.Inventory{Unit: gpushare.Unit{MiB: 15}, Devices: []gpushare.Device{
				{Index: 0, UUID: "GPU-n1-0", Model: "T4", Units: 1000, MemoryMiB: 15109, Healthy: true},
				{Index: 1, UUID: "GPU-n1-1", Model: "T4", Units: 1000, MemoryMiB: 15109, Healthy: true},
			}}
			if diff := cmp.Diff(wantInv, inv); diff != "" {
				t.Errorf("inventory (-want,+got):\n%s", diff)
			}
			isReady := len(node.Status.Conditions) == 1 && node.Status.Conditions[0].Type == corev1.NodeReady &&
				node.Status.Conditions[0].Status == corev1.ConditionTrue
			if isReady != tc.wantReady || len(node.Spec.Taints) != len(tc.node.Taints) {
				t.Errorf("conditions %+v taints %v; want Ready %v, taints %v", node.Status.Conditions, node.Spec.Taints, tc.wantReady, tc.node.Taints)
			}
		})
	}
}

func TestPodBuild(t *testing.T) {
	res := gpushare.DefaultResources()
	tests := []struct {
		name      string
		pod       Pod
		wantReq   corev1.ResourceList
		wantLimit corev1.ResourceList
		wantCards int
		// wantScheduler: empty leaves the pod to the default scheduler (the API server
		// fills in default-scheduler).
		wantScheduler string
	}{
		{
			name:      "one card: gpu-mem only",
			pod:       Pod{MilliCPU: 6000, MemoryMiB: 12288, Units: 460, Cards: 1},
			wantReq:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6"), corev1.ResourceMemory: resource.MustParse("12Gi"), res.Mem: resource.MustParse("460")},
			wantLimit: corev1.ResourceList{res.Mem: resource.MustParse("460")},
			wantCards: 1,
		},
		{
			name:      "several cards: gpu-count too",
			pod:       Pod{Units: 16, Cards: 2},
			wantReq:   corev1.ResourceList{res.Mem: resource.MustParse("16"), res.Count: resource.MustParse("2")},
			wantLimit: corev1.ResourceList{res.Mem: resource.MustParse("16"), res.Count: resource.MustParse("2")},
			wantCards: 2,
		},
		{
			name:    "CPU only",
			pod:     Pod{MilliCPU: 500},
			wantReq: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
		},
		{
			name:          "a second scheduler",
			pod:           Pod{Units: 4, Cards: 1, SchedulerName: "gpushare-scheduler"},
			wantReq:       corev1.ResourceList{res.Mem: resource.MustParse("4")},
			wantLimit:     corev1.ResourceList{res.Mem: resource.MustParse("4")},
			wantCards:     1,
			wantScheduler: "gpushare-scheduler",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.pod.Name, tc.pod.Namespace, tc.pod.Labels = "p", "ns", map[string]string{"set": "a"}
			pod := tc.pod.Build(res)
			if pod.Name != "p" || pod.Namespace != "ns" || pod.Labels["set"] != "a" {
				t.Errorf("pod %s/%s labels %v", pod.Namespace, pod.Name, pod.Labels)
			}
			if pod.Spec.SchedulerName != tc.wantScheduler {
				t.Errorf("schedulerName %q, want %q", pod.Spec.SchedulerName, tc.wantScheduler)
			}
			r := pod.Spec.Containers[0].Resources
			if diff := cmp.Diff(tc.wantReq, r.Requests, quantityEqual); diff != "" {
				t.Errorf("requests (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantLimit, r.Limits, quantityEqual); diff != "" {
				t.Errorf("limits (-want,+got):\n%s", diff)
			}
			if tc.pod.Units == 0 {
				return
			}
			req, err := res.PodRequest(pod)
			if err != nil {
				t.Fatal(err)
			}
			if req.TotalUnits() != tc.pod.Units || req.MaxCards() != tc.wantCards {
				t.Errorf("PodRequest: %d units on %d cards, want %d on %d", req.TotalUnits(), req.MaxCards(), tc.pod.Units, tc.wantCards)
			}
		})
	}
}

// TestNodeBuildLabels: a card model becomes a valid product label (the API server refuses a
// node whose label value has spaces), and an invalid label is refused before any request.
func TestNodeBuildLabels(t *testing.T) {
	res := gpushare.DefaultResources()
	for _, tc := range []struct {
		model   string
		labels  map[string]string
		product string
		wantErr bool
	}{
		{model: "V100M16", product: "V100M16"},
		{model: "NVIDIA A100-SXM4-16GB", product: "NVIDIA-A100-SXM4-16GB"},
		{model: "Tesla T4", product: "Tesla-T4"},
		{model: "T4", labels: map[string]string{"team": "a b"}, wantErr: true},
	} {
		n := Node{Name: "n1", Model: tc.model, Cards: 1, CardUnits: 16, Unit: gpushare.GiB,
			MilliCPU: 1000, MemoryMiB: 1024, MaxPods: 10, Labels: tc.labels}
		node, err := n.Build(res)
		if tc.wantErr {
			if err == nil {
				t.Errorf("%q %v: no error", tc.model, tc.labels)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.model, err)
		}
		if got := node.Labels[LabelGPUProduct]; got != tc.product {
			t.Errorf("%q: product label %q, want %q", tc.model, got, tc.product)
		}
	}
}

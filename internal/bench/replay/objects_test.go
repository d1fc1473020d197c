package replay

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpushare/gpushare/internal/bench/objects"
	"github.com/gpushare/gpushare/pkg/gpushare"
)

func newObjects(t *testing.T, mode UnitMode, nodes ...NodeSpec) Objects {
	t.Helper()
	u, err := newUnits(mode, nodes)
	if err != nil {
		t.Fatal(err)
	}
	return Objects{Units: u, Resources: gpushare.DefaultResources(), Namespace: "replay"}
}

func TestNodeObject(t *testing.T) {
	n := NodeSpec{Name: "openb-node-0001", MilliCPU: 96000, MemoryMiB: 2048, GPUs: 2, Model: "T4"}
	node, err := newObjects(t, UnitMilli, n).Node(n)
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{
		"cgpu": "true", objects.LabelGPUProduct: "T4", LabelReplay: "true",
		"kubernetes.io/hostname": "openb-node-0001", "type": "kwok",
	}
	if diff := cmp.Diff(wantLabels, node.Labels); diff != "" {
		t.Errorf("labels (-want,+got):\n%s", diff)
	}
	if node.Annotations["kwok.x-k8s.io/node"] != "fake" {
		t.Errorf("kwok annotation missing: %v", node.Annotations)
	}
	// 2 cards × 1000 units; memory 2048 MiB = 2Gi.
	want := map[corev1.ResourceName]string{
		corev1.ResourceCPU: "96", corev1.ResourceMemory: "2Gi", corev1.ResourcePods: "1k",
		"aliyun.com/gpu-count": "2", "aliyun.com/gpu-mem": "2k",
	}
	for name, q := range want {
		got := node.Status.Allocatable[name]
		if got.Cmp(resource.MustParse(q)) != 0 {
			t.Errorf("allocatable %s = %s, want %s", name, got.String(), q)
		}
		if c := node.Status.Capacity[name]; c.Cmp(got) != 0 {
			t.Errorf("capacity %s = %s, allocatable %s", name, c.String(), got.String())
		}
	}
	// The extender reads the per-card inventory: T4 15109 MiB / 1000 → 15 MiB units.
	inv, src, err := gpushare.DefaultResources().NodeInventory(node)
	if err != nil || src != gpushare.FromAnnotation {
		t.Fatalf("inventory: %v from %s", err, src)
	}
	wantInv := gpushare.Inventory{Unit: gpushare.Unit{MiB: 15}, Devices: []gpushare.Device{
		{Index: 0, UUID: "GPU-openb-node-0001-0", Model: "T4", Units: 1000, MemoryMiB: 15109, Healthy: true},
		{Index: 1, UUID: "GPU-openb-node-0001-1", Model: "T4", Units: 1000, MemoryMiB: 15109, Healthy: true},
	}}
	if diff := cmp.Diff(wantInv, inv); diff != "" {
		t.Errorf("inventory (-want,+got):\n%s", diff)
	}
}

func TestNodeObjectGiB(t *testing.T) {
	n := NodeSpec{Name: "n", MilliCPU: 1000, MemoryMiB: 1024, GPUs: 4, Model: "V100M32"}
	node, err := newObjects(t, UnitGiB, n).Node(n)
	if err != nil {
		t.Fatal(err)
	}
	// 32510 MiB → 31 GiB per card, 124 in all.
	if got := node.Status.Allocatable["aliyun.com/gpu-mem"]; got.Value() != 124 {
		t.Errorf("gpu-mem = %s, want 124", got.String())
	}
}

func TestPodObject(t *testing.T) {
	nodes := []NodeSpec{
		{Name: "a", GPUs: 2, Model: "T4"},
		{Name: "b", GPUs: 8, Model: "V100M32"},
	}
	tests := []struct {
		name      string
		mode      UnitMode
		pod       PodSpec
		wantReq   corev1.ResourceList
		wantLimit corev1.ResourceList
		wantSpec  []string
	}{
		{
			name: "sharing pod: gpu-mem = gpu_milli, no gpu-count",
			mode: UnitMilli,
			pod:  PodSpec{Name: "openb-pod-0001", MilliCPU: 6000, MemoryMiB: 12288, NumGPU: 1, GPUMilli: 460},
			wantReq: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("6"), corev1.ResourceMemory: resource.MustParse("12Gi"),
				"aliyun.com/gpu-mem": resource.MustParse("460"),
			},
			wantLimit: corev1.ResourceList{"aliyun.com/gpu-mem": resource.MustParse("460")},
		},
		{
			name: "multi-GPU pod: gpu-mem = 1000 × 8, gpu-count 8, gpu_spec affinity",
			mode: UnitMilli,
			pod:  PodSpec{Name: "openb-pod-0017", MilliCPU: 88000, MemoryMiB: 1024, NumGPU: 8, GPUMilli: 1000, GPUSpec: []string{"G2", "T4"}},
			wantReq: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("88"), corev1.ResourceMemory: resource.MustParse("1Gi"),
				"aliyun.com/gpu-mem": resource.MustParse("8k"), "aliyun.com/gpu-count": resource.MustParse("8"),
			},
			wantLimit: corev1.ResourceList{"aliyun.com/gpu-mem": resource.MustParse("8k"), "aliyun.com/gpu-count": resource.MustParse("8")},
			wantSpec:  []string{"G2", "T4"},
		},
		{
			name:    "CPU-only pod: cpu and memory only",
			mode:    UnitMilli,
			pod:     PodSpec{Name: "Openb_Pod_9", MilliCPU: 500},
			wantReq: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
		},
		{
			// smallest allowed card: T4 15109 MiB → 14 GiB; 470 milli → ceil(6.58) = 7.
			name: "GiB mode: share of the smallest card the pod may use",
			mode: UnitGiB,
			pod:  PodSpec{Name: "p", MilliCPU: 1000, NumGPU: 1, GPUMilli: 470},
			wantReq: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("1"), "aliyun.com/gpu-mem": resource.MustParse("7"),
			},
			wantLimit: corev1.ResourceList{"aliyun.com/gpu-mem": resource.MustParse("7")},
		},
		{
			// only V100M32 allowed: 31 GiB × 2 cards.
			name: "GiB mode: gpu_spec narrows the card",
			mode: UnitGiB,
			pod:  PodSpec{Name: "p", MilliCPU: 1000, NumGPU: 2, GPUMilli: 1000, GPUSpec: []string{"V100M32"}},
			wantReq: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("1"), "aliyun.com/gpu-mem": resource.MustParse("62"),
				"aliyun.com/gpu-count": resource.MustParse("2"),
			},
			wantLimit: corev1.ResourceList{"aliyun.com/gpu-mem": resource.MustParse("62"), "aliyun.com/gpu-count": resource.MustParse("2")},
			wantSpec:  []string{"V100M32"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod, err := newObjects(t, tc.mode, nodes...).Pod(tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			if pod.Name != strings.ToLower(strings.ReplaceAll(tc.pod.Name, "_", "-")) || pod.Namespace != "replay" {
				t.Errorf("pod %s/%s", pod.Namespace, pod.Name)
			}
			res := pod.Spec.Containers[0].Resources
			if diff := cmp.Diff(tc.wantReq, res.Requests, quantityEqual); diff != "" {
				t.Errorf("requests (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantLimit, res.Limits, quantityEqual); diff != "" {
				t.Errorf("limits (-want,+got):\n%s", diff)
			}
			// The protocol package must read back what the trace asked for.
			req, err := gpushare.DefaultResources().PodRequest(pod)
			if err != nil {
				t.Fatal(err)
			}
			if tc.pod.NumGPU > 0 && (req.MaxCards() != tc.pod.NumGPU) {
				t.Errorf("PodRequest cards = %d, want %d", req.MaxCards(), tc.pod.NumGPU)
			}
			var spec []string
			if a := pod.Spec.Affinity; a != nil {
				expr := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0]
				if expr.Key != objects.LabelGPUProduct || expr.Operator != corev1.NodeSelectorOpIn {
					t.Errorf("affinity expression %+v", expr)
				}
				spec = expr.Values
			}
			if diff := cmp.Diff(tc.wantSpec, spec); diff != "" {
				t.Errorf("gpu_spec affinity (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestPodSchedulerName: with a scheduler name every replay pod, GPU or CPU-only, goes to
// that scheduler (the trace replays through one scheduler); without one, the default.
func TestPodSchedulerName(t *testing.T) {
	nodes := []NodeSpec{{Name: "a", GPUs: 2, Model: "T4"}}
	u, err := newUnits(UnitMilli, nodes)
	if err != nil {
		t.Fatal(err)
	}
	pods := []PodSpec{
		{Name: "gpu", MilliCPU: 1000, NumGPU: 1, GPUMilli: 500},
		{Name: "cpu", MilliCPU: 1000},
	}
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"default scheduler", Options{Namespace: "replay"}, ""},
		{"gpushare-scheduler", Options{Namespace: "replay", SchedulerName: "gpushare-scheduler"}, "gpushare-scheduler"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts.objects(u)
			for _, p := range pods {
				pod, err := o.Pod(p)
				if err != nil {
					t.Fatal(err)
				}
				if pod.Spec.SchedulerName != tc.want || pod.Namespace != "replay" {
					t.Errorf("pod %s: schedulerName %q namespace %q, want %q replay", p.Name, pod.Spec.SchedulerName, pod.Namespace, tc.want)
				}
			}
		})
	}
}

var quantityEqual = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

func TestObjectErrors(t *testing.T) {
	o := newObjects(t, UnitMilli)
	if _, err := o.Node(NodeSpec{Name: "Bad Name", GPUs: 1, Model: "T4"}); err == nil || !strings.Contains(err.Error(), "not a valid node name") {
		t.Errorf("node error = %v", err)
	}
	if _, err := o.Pod(PodSpec{Name: "bad name!"}); err == nil || !strings.Contains(err.Error(), "not a valid pod name") {
		t.Errorf("pod error = %v", err)
	}
	if _, err := newUnits(UnitGiB, []NodeSpec{{Name: "n", GPUs: 1, Model: "H100"}}); err == nil || !strings.Contains(err.Error(), `model "H100" of unknown memory`) {
		t.Errorf("units error = %v", err)
	}
	if _, err := newUnits("bytes", nil); err == nil || !strings.Contains(err.Error(), `want "milli" or "gib"`) {
		t.Errorf("units error = %v", err)
	}
}

// TestPodAffinityMatchesNodeLabel: a gpu_spec model selects the label value its nodes carry,
// even where the model name is not a valid label value as it stands.
func TestPodAffinityMatchesNodeLabel(t *testing.T) {
	o := newObjects(t, UnitMilli)
	pod, err := o.Pod(PodSpec{Name: "p", MilliCPU: 1000, NumGPU: 1, GPUMilli: 500, GPUSpec: []string{"Tesla T4", "G2"}})
	if err != nil {
		t.Fatal(err)
	}
	got := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Values
	want := []string{objects.ProductLabel("Tesla T4"), "G2"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("affinity values (-want,+got):\n%s", d)
	}
}

package cache

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// What the cache derives from a trimmed object must equal what it derives from the original.
func TestTrimPodKeepsWhatTheCacheReads(t *testing.T) {
	res := gpushare.DefaultResources()
	always := corev1.ContainerRestartPolicyAlways
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "p", Namespace: "ns", UID: "u", ResourceVersion: "7",
			Labels: map[string]string{"app": "x"},
			Annotations: map[string]string{
				gpushare.AnnotationAllocation:                      `{"0":{"1":4}}`,
				gpushare.AnnotationInitAllocation:                  `{"0":{"1":2}}`,
				"kubectl.kubernetes.io/last-applied-configuration": "{…big…}",
			},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		},
		Spec: corev1.PodSpec{
			NodeName: "n1",
			InitContainers: []corev1.Container{{Name: "side", RestartPolicy: &always, Image: "img", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{res.Mem: resource.MustParse("2"), corev1.ResourceCPU: resource.MustParse("1")},
			}}},
			Containers: []corev1.Container{{Name: "main", Image: "img", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}, Resources: corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{res.Mem: resource.MustParse("4"), "nvidia.com/gpu": resource.MustParse("1")},
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
			}}},
			Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady}}},
	}
	out, err := TrimPod(res)(pod)
	if err != nil {
		t.Fatal(err)
	}
	trimmed := out.(*corev1.Pod)

	wantReq, _ := res.PodRequest(pod)
	gotReq, err := res.PodRequest(trimmed)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantReq, gotReq); diff != "" {
		t.Errorf("gpu request (-want,+got):\n%s", diff)
	}
	wantAlloc, _, _ := res.ReadAllocation(pod)
	gotAlloc, ok, err := res.ReadAllocation(trimmed)
	if err != nil || !ok {
		t.Fatalf("allocation lost: %v %v", ok, err)
	}
	if diff := cmp.Diff(wantAlloc.CardUsage(pod), gotAlloc.CardUsage(trimmed)); diff != "" {
		t.Errorf("card usage (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(hostRequest(pod), hostRequest(trimmed)); diff != "" {
		t.Errorf("host request (-want,+got):\n%s", diff)
	}
	if trimmed.Spec.NodeName != "n1" || trimmed.Status.Phase != corev1.PodRunning || trimmed.UID != "u" {
		t.Errorf("identity/nodeName/phase lost: %+v", trimmed.ObjectMeta)
	}
	if len(trimmed.Annotations) != 2 || trimmed.ManagedFields != nil || trimmed.Labels != nil ||
		trimmed.Spec.Containers[0].Image != "" || trimmed.Spec.Containers[0].Env != nil || trimmed.Status.Conditions != nil {
		t.Errorf("trimmed pod keeps what nobody reads: %+v", trimmed)
	}
	if _, kept := trimmed.Spec.Containers[0].Resources.Limits["nvidia.com/gpu"]; kept {
		t.Error("unrelated resource kept")
	}
}

func TestTrimNodeKeepsWhatTheCacheReads(t *testing.T) {
	res := gpushare.DefaultResources()
	inv := `{"unit":"GiB","devices":[{"index":0,"uuid":"GPU-a","units":14,"healthy":true}]}`
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: "n1", UID: "u", Labels: map[string]string{"cgpu": "true"},
			Annotations:   map[string]string{gpushare.AnnotationNodeInventory: inv, "node.alpha.kubernetes.io/ttl": "0"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
		},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{
				res.Mem: resource.MustParse("14"), res.Count: resource.MustParse("1"),
				corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"),
				corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
			},
			Images:     []corev1.ContainerImage{{Names: []string{"registry/some/image:tag"}, SizeBytes: 1 << 30}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	out, err := TrimNode(res)(node)
	if err != nil {
		t.Fatal(err)
	}
	trimmed := out.(*corev1.Node)
	wantInv, wantSrc, _ := res.NodeInventory(node)
	gotInv, gotSrc, err := res.NodeInventory(trimmed)
	if err != nil || gotSrc != wantSrc {
		t.Fatalf("inventory source %q err %v, want %q", gotSrc, err, wantSrc)
	}
	if diff := cmp.Diff(wantInv, gotInv); diff != "" {
		t.Errorf("inventory (-want,+got):\n%s", diff)
	}
	h := newHostBook()
	h.setNode(trimmed)
	if got, _ := h.free("n1"); got.CPUMilli != 8000 || got.MemoryMiB != 32*1024 {
		t.Errorf("host from trimmed node = %+v", got)
	}
	if trimmed.Status.Images != nil || trimmed.Status.Conditions != nil || trimmed.ManagedFields != nil || len(trimmed.Annotations) != 1 || len(trimmed.Status.Allocatable) != 4 {
		t.Errorf("trimmed node keeps what nobody reads: %+v", trimmed)
	}
	// Without the inventory annotation the allocatable fallback still works.
	delete(node.Annotations, gpushare.AnnotationNodeInventory)
	out, _ = TrimNode(res)(node)
	if inv, src, err := res.NodeInventory(out.(*corev1.Node)); err != nil || src != gpushare.FromAllocatable || inv.TotalUnits() != 14 {
		t.Errorf("fallback from trimmed node: %+v %q %v", inv, src, err)
	}
}

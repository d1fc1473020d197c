package dra

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// gpuMemPod is a pod bound to node in phase, whose container asks for 4 units of res.
func gpuMemPod(name, node string, phase corev1.PodPhase, res corev1.ResourceName) *corev1.Pod {
	q := corev1.ResourceList{res: resource.MustParse("4")}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: q, Limits: q}}}},
		Status:     corev1.PodStatus{Phase: phase},
	}
}

func TestCheckDevicePluginPods(t *testing.T) {
	mem := gpushare.DefaultMemResource
	with := func(p *corev1.Pod, f func(*corev1.Pod)) *corev1.Pod { f(p); return p }
	tests := []struct {
		name     string
		resource corev1.ResourceName
		pods     []*corev1.Pod
		listErr  error
		wantErr  []string // substrings; nil: no error
	}{
		{name: "no pods"},
		{name: "a running gpu-mem pod", pods: []*corev1.Pod{gpuMemPod("nb", testNode, corev1.PodRunning, mem)},
			wantErr: []string{"pods team-a/nb", "still hold aliyun.com/gpu-mem through the device-plugin back end", "drain the node first", "kubectl drain node-a"}},
		{name: "a pending pod bound to the node", pods: []*corev1.Pod{gpuMemPod("nb", testNode, corev1.PodPending, mem)}, wantErr: []string{"team-a/nb"}},
		{name: "an init container", pods: []*corev1.Pod{with(gpuMemPod("init", testNode, corev1.PodPending, "cpu"), func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "warm", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{mem: resource.MustParse("1")}}}}
		})}, wantErr: []string{"team-a/init"}},
		{name: "a limit only", pods: []*corev1.Pod{with(gpuMemPod("lim", testNode, corev1.PodRunning, mem), func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = nil
		})}, wantErr: []string{"team-a/lim"}},
		{name: "several, sorted", pods: []*corev1.Pod{gpuMemPod("b", testNode, corev1.PodRunning, mem), gpuMemPod("a", testNode, corev1.PodRunning, mem)},
			wantErr: []string{"pods team-a/a, team-a/b "}},
		{name: "succeeded and failed pods hold nothing", pods: []*corev1.Pod{gpuMemPod("done", testNode, corev1.PodSucceeded, mem), gpuMemPod("crashed", testNode, corev1.PodFailed, mem)}},
		{name: "another node's pod", pods: []*corev1.Pod{gpuMemPod("away", "node-b", corev1.PodRunning, mem)}},
		{name: "a pod without gpu-mem", pods: []*corev1.Pod{gpuMemPod("cpu", testNode, corev1.PodRunning, "cpu")}},
		{name: "gpu-mem served from DRA devices", pods: []*corev1.Pod{with(gpuMemPod("ext", testNode, corev1.PodRunning, mem), func(p *corev1.Pod) {
			p.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "ext-claim"}
		})}},
		{name: "another resource name", resource: "example.com/gpu-mem", pods: []*corev1.Pod{gpuMemPod("old", testNode, corev1.PodRunning, mem), gpuMemPod("nb", testNode, corev1.PodRunning, "example.com/gpu-mem")},
			wantErr: []string{"pods team-a/nb on", "example.com/gpu-mem"}},
		{name: "pods that cannot be listed", listErr: errors.New("forbidden"), wantErr: []string{"listing the pods of node node-a", "forbidden"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			for _, p := range tt.pods {
				if _, err := client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if tt.listErr != nil {
				client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, tt.listErr })
			}
			res := tt.resource
			if res == "" {
				res = mem
			}
			err := checkDevicePluginPods(context.Background(), client, testNode, res)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("checkDevicePluginPods: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("checkDevicePluginPods let the plugin start")
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q: want it to say %q", err, want)
				}
			}
		})
	}
}

// TestRunRefusesDevicePluginPods: Run does not start on a node labelled for DRA while a pod
// there still holds memory through the device plugin.
func TestRunRefusesDevicePluginPods(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, done := startRun(t, ctx, map[string]string{gpushare.LabelBackend: string(gpushare.BackendDRA)}, func(rc *runSetup) {
		p := gpuMemPod("nb", testNode, corev1.PodRunning, gpushare.DefaultMemResource)
		if _, err := rc.Client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "drain the node first") || !strings.Contains(err.Error(), "team-a/nb") {
			t.Errorf("Run: %v; want a refusal naming team-a/nb and saying to drain the node", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run started on a node whose pod holds device-plugin memory")
	}
}

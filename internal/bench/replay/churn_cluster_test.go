package replay

import (
	"context"
	"math"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestClusterChurn plays a short stream against a fake API server: each pod is created at its
// arrival, deleted its run time after the scheduler bound it, a pod the scheduler never
// binds counts as never placed, and the samples follow the allocated GPU up and back down.
func TestClusterChurn(t *testing.T) {
	stream := []ChurnPod{
		{PodSpec: gpuPod("a", 1, 500), Arrive: 0, Duration: 1},
		{PodSpec: gpuPod("b", 1, 1000), Arrive: 0.1, Duration: 0.8},
		{PodSpec: gpuPod("forever", 1, 300), Arrive: 0.2, Duration: math.Inf(1)},
		{PodSpec: gpuPod("never", 1, 500), Arrive: 0.3, Duration: 0.2},
	}
	res, c := playChurn(t, stream, 0, 2*time.Second, func(p *corev1.Pod) string {
		if p.Name == "never" {
			return ""
		}
		return "n1"
	})
	if len(res.Waits) != 3 || res.NeverPlaced != 1 || res.NeverPlacedGPU != 1 || res.NeverFit != 0 {
		t.Errorf("placed %d, never placed %d (GPU %d, never fit %d); want 3, 1 (1, 0)", len(res.Waits), res.NeverPlaced, res.NeverPlacedGPU, res.NeverFit)
	}
	if res.Nodes[0] != "n1" || res.Nodes[3] != "" {
		t.Errorf("nodes %q", res.Nodes)
	}
	var peak int64
	for _, s := range res.Samples {
		peak = max(peak, s.AllocatedMilli)
	}
	last := res.Samples[len(res.Samples)-1]
	if peak != 1800 || last.AllocatedMilli != 300 || last.PendingPods != 1 {
		t.Errorf("peak %d milli, last sample %v; want a peak of 1800 and at the end 300 milli (forever) with 1 pod waiting", peak, last)
	}
	pods, err := c.CoreV1().Pods("replay").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, p := range pods.Items {
		left = append(left, p.Name)
	}
	if len(left) != 2 {
		t.Errorf("pods left %v, want never and forever (the others deleted when their run time was over)", left)
	}
}

// TestClusterChurnFastForward: pods that arrived before the replay's start are not played
// when they would be gone by then, and otherwise run from the start for what is left of
// their run time; replay times start at t0.
func TestClusterChurnFastForward(t *testing.T) {
	stream := []ChurnPod{
		{PodSpec: gpuPod("gone", 1, 500), Arrive: 0, Duration: 5},     // gone at 5, before t0 = 10
		{PodSpec: gpuPod("old", 1, 500), Arrive: 2, Duration: 8.5},    // runs until 10.5
		{PodSpec: gpuPod("new", 1, 1000), Arrive: 10.2, Duration: 30}, // still running at the end
	}
	res, c := playChurn(t, stream, 10, 2*time.Second, nil)
	if res.Nodes[0] != "-" || res.Nodes[1] != "n1" || res.Nodes[2] != "n1" || len(res.Waits) != 3 {
		t.Errorf("nodes %q, %d waits; want gone not played, old and new on n1, 3 placed", res.Nodes, len(res.Waits))
	}
	if first := res.Samples[0]; first.Time < 10 || first.Time > 11 {
		t.Errorf("first sample at replay time %g, want about t0 = 10", first.Time)
	}
	last := res.Samples[len(res.Samples)-1]
	if last.AllocatedMilli != 1000 {
		t.Errorf("last sample %v, want only new's 1000 milli (old left at 10.5)", last)
	}
	pods, err := c.CoreV1().Pods("replay").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 || pods.Items[0].Name != "new" {
		t.Errorf("pods left %v (%v), want new alone", pods, err)
	}
}

// playChurn plays stream from replay time t0 against a fake API server whose scheduler binds
// each pod to n1, or marks it unschedulable when place says "" (nil: always n1); it returns
// what the replay saw and the client.
func playChurn(t *testing.T, stream []ChurnPod, t0 float64, drain time.Duration, place func(*corev1.Pod) string) (churnResult, *fake.Clientset) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	c := fake.NewClientset()
	fakeKwok(ctx, t, c)
	if place == nil {
		place = func(*corev1.Pod) string { return "n1" }
	}
	fakeScheduler(ctx, t, c, place)
	nodes := []NodeSpec{{Name: "n1", MilliCPU: 8000, MemoryMiB: 1024, GPUs: 2, Model: "T4"}}
	d := testDriver(t, c)
	if err := d.ensureNamespace(ctx); err != nil {
		t.Fatal(err)
	}
	cc, err := newClusterChurn(d, stream, nodes, t0)
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(ctx)
	stop, err := d.startCluster(rctx, rcancel, nodes, cc.handler())
	t.Cleanup(stop)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cc.play(rctx, drain)
	if err != nil {
		t.Fatal(err)
	}
	return res, c
}

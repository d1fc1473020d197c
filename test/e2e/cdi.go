//go:build e2e

package e2e

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// CaseCDIHandover: share-plugin with --device-list-strategy=cdi-cri on the real node with two
// simulated T4s. Allocate names the cards as CDI devices, kubelet passes them through the
// CRI, and containerd injects them from the spec share-plugin wrote: each container sees
// exactly the cards its allocation annotation names (the mounted card files), and no
// NVIDIA_VISIBLE_DEVICES comes from the plugin.
func CaseCDIHandover(t *testing.T, e *Env) {
	requireRealNode(t, e)
	requireBinary(t, e, "extender", "share-plugin")
	ctx := testContext(t, 5*time.Minute)
	inv := restartSharePlugin(ctx, t, e, "t4:2", "GPUSHARE_DEVICE_LIST_STRATEGY=cdi-cri")
	ns := newNamespace(t, e)
	// c0: 4 units on one card; c1: 8 units on each of the two cards.
	createPod(t, e, gpuPod(ns, "cdi", e.RealNode, ctr{units: 4}, ctr{units: 16, cards: 2}))
	waitPod(t, e, ns, "cdi", 2*time.Minute, "Running", isRunning)
	p, err := e.Client.CoreV1().Pods(ns).Get(ctx, "cdi", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	alloc, ok, err := res.ReadAllocation(p)
	if err != nil || !ok {
		t.Fatalf("allocation %v ok=%v err=%v", alloc, ok, err)
	}
	for i, c := range p.Spec.Containers {
		var want []string
		for idx := range alloc.For(gpushare.ContainerRef{Index: i}) {
			dev, ok := inv.Device(idx)
			if !ok {
				t.Fatalf("container %s: card %d not in the inventory %+v", c.Name, idx, inv)
			}
			want = append(want, dev.UUID)
		}
		sort.Strings(want)
		logs := containerLogs(t, e, ns, "cdi", c.Name)
		if line := "GPUSHARE_SIMULATED_GPUS=" + strings.Join(want, ",") + "\n"; len(want) == 0 || !strings.Contains(logs, line) {
			t.Errorf("container %s was given cards %v; its log (want %q):\n%s", c.Name, want, line, logs)
		}
		if strings.Contains(logs, gpushare.EnvVisibleDevices+"=") {
			t.Errorf("container %s got %s with cdi-cri:\n%s", c.Name, gpushare.EnvVisibleDevices, logs)
		}
	}
}

// containerLogs is one container's log, waiting up to 20 s for it to be non-empty.
func containerLogs(t *testing.T, e *Env, ns, pod, container string) string {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	var out []byte
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		b, err := e.Client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
		if err != nil || len(b) == 0 {
			return false, nil
		}
		out = b
		return true, nil
	})
	if err != nil {
		t.Fatalf("logs of container %s of pod %s/%s: %v", container, ns, pod, err)
	}
	return string(out)
}

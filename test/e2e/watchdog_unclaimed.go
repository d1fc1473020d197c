//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// CaseUsageWatchdogUnclaimed: a pod that requested no gpu-mem runs a process the simulated
// card lists (as a container that widened its NVIDIA_VISIBLE_DEVICES would). The watchdog
// must find the pod from the process's real cgroup, send the GPUMemoryUnclaimed event on it
// and export its use without a grant.
func CaseUsageWatchdogUnclaimed(t *testing.T, e *Env) {
	requireRealNode(t, e)
	requireBinary(t, e, "extender", "share-plugin")
	ctx := testContext(t, 4*time.Minute)
	procFile := filepath.Join(e.cfg.state, "gpu-processes.yaml")
	t.Cleanup(func() { _ = os.Remove(procFile) })
	restartSharePlugin(ctx, t, e, "t4:1", "GPUSHARE_USAGE_INTERVAL=1s")
	ns := newNamespace(t, e)
	plain := gpuPod(ns, "plain", e.RealNode, ctr{})
	plain.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	createPod(t, e, plain)
	p := waitPod(t, e, ns, "plain", 2*time.Minute, "Running", isRunning)
	writeProcesses(t, procFile, containerPID(t, string(p.UID), "gpuenv"), 700)

	var events string
	err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(context.Context) (bool, error) {
		events = podEvents(e, ns, "plain")
		return strings.Contains(events, gpushare.EventGPUMemoryUnclaimed), nil
	})
	if err != nil {
		t.Fatalf("no %s event for a pod without gpu-mem using 700 MiB: %v\nevents:\n%s", gpushare.EventGPUMemoryUnclaimed, err, events)
	}
	if !strings.Contains(events, "700 MiB") {
		t.Errorf("the event lacks the amount:\n%s", events)
	}
	want := fmt.Sprintf(`gpushare_pod_unclaimed_gpu_memory_used_bytes{card="0",namespace=%q,node=%q,pod="plain",`, ns, e.RealNode)
	if metrics := scrape(t, e.SharePluginURL+"/metrics"); !strings.Contains(metrics, want) {
		t.Errorf("share-plugin's metrics lack %s…:\n%s", want, grepLines(metrics, "gpushare_pod_unclaimed"))
	}
}

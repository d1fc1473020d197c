//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// CaseDRAUsageWatchdog: the usage watchdog on the DRA back end. The real node served by
// share-plugin --backend=dra (one simulated T4) with the local cluster's processes file; a pod whose claim
// holds 4 GiB runs a process the file lists at 6144 MiB. The watchdog charges it to the
// pod's container through its cgroup, grants it the claim's 4 GiB, and the plugin's
// /metrics show used and granted; the pod gets the GPUMemoryOverGrant event.
func CaseDRAUsageWatchdog(t *testing.T, e *Env) {
	requireRealNode(t, e)
	requireBinary(t, e, "share-plugin")
	ctx := testContext(t, 5*time.Minute)
	// The file the local cluster's share-plugin reads (--simulate-processes-file).
	procFile := filepath.Join(e.cfg.state, "gpu-processes.yaml")
	t.Cleanup(func() { _ = os.Remove(procFile) })
	startDRAPlugin(ctx, t, e, filepath.Join(t.TempDir(), "faults"), "GPUSHARE_USAGE_INTERVAL=1s", "GPUSHARE_OVER_GRANT_GRACE=0s")
	ns := newNamespace(t, e)
	p := startClaimPod(ctx, t, e, ns, "hog", "4Gi", nil)
	writeProcesses(t, procFile, containerPID(t, string(p.UID), "gpuenv"), 6144)

	metrics := sharePluginMetricsURL(t, e)
	want := []struct{ metric, value string }{
		{"gpushare_container_gpu_memory_granted_bytes", "4.294967296e+09"},
		{"gpushare_container_gpu_memory_used_bytes", "6.442450944e+09"},
	}
	var body string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the DRA plugin's container metrics:\n%s", grepLines(body, "gpushare_container_"))
		}
	})
	waitFor(ctx, t, time.Minute, "the DRA plugin's /metrics to show the claim pod's grant and use", func() bool {
		_, body = httpGet(ctx, t, metrics+"/metrics")
		for _, w := range want {
			if !hasMetricLine(body, w.metric, fmt.Sprintf(`namespace=%q`, ns), `pod="hog"`, `container="c0"`, " "+w.value) {
				return false
			}
		}
		return true
	})
	waitFor(ctx, t, time.Minute, "the "+gpushare.EventGPUMemoryOverGrant+" event on the claim pod", func() bool {
		return strings.Contains(podEvents(e, ns, "hog"), gpushare.EventGPUMemoryOverGrant)
	})
}

// hasMetricLine reports whether body has a line of metric holding every part.
func hasMetricLine(body, metric string, parts ...string) bool {
	for _, l := range strings.Split(body, "\n") {
		if !strings.HasPrefix(l, metric+"{") {
			continue
		}
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return true
		}
	}
	return false
}

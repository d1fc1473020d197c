//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// CaseUsageWatchdog: share-plugin's usage watchdog on the real node. The simulated card's
// process list (the processes file) names the host PID of a real container granted 4 GiB:
// first at 3000 MiB (under its grant: nothing happens), then at 6144 MiB. The watchdog must
// find the pod and container from that PID's cgroup (the kubelet's and containerd's real
// layout), and after the grace emit the GPUMemoryOverGrant event, annotate the pod, export
// used vs granted and, listed at 50 % SM, the SM utilisation (checkSMUtilization), and
// publish the use that `kubectl inspect gpushare -d` shows.
func CaseUsageWatchdog(t *testing.T, e *Env) {
	requireRealNode(t, e)
	requireBinary(t, e, "extender", "share-plugin", "kubectl-inspect-gpushare")
	ctx := testContext(t, 5*time.Minute)
	procFile := filepath.Join(e.cfg.state, "gpu-processes.yaml")
	t.Cleanup(func() { _ = os.Remove(procFile) })
	restartSharePlugin(ctx, t, e, "t4:1", "GPUSHARE_USAGE_INTERVAL=1s", "GPUSHARE_OVER_GRANT_GRACE=2s",
		"GPUSHARE_OVER_GRANT_ACTION=annotate")
	ns := newNamespace(t, e)
	createPod(t, e, gpuPod(ns, "hog", e.RealNode, ctr{units: 4}))
	p := waitPod(t, e, ns, "hog", 2*time.Minute, "Running", isRunning)
	pid := containerPID(t, string(p.UID), "gpuenv")

	writeProcesses(t, procFile, pid, 3000)
	// First the watchdog's own report that it charged the 3000 MiB to the container, then
	// three graces (six intervals) of that reading without an event.
	used := fmt.Sprintf(`gpushare_container_gpu_memory_used_bytes{card="0",container="c0",namespace=%q,`, ns)
	seen := func() bool { return metricValue(scrape(t, e.SharePluginURL+"/metrics"), used) == float64(3000<<20) }
	if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(context.Context) (bool, error) { return seen(), nil }); err != nil {
		t.Fatalf("the watchdog never reported 3000 MiB used by the container: %v\n%s", err, grepLines(scrape(t, e.SharePluginURL+"/metrics"), "gpushare_container_"))
	}
	for deadline := time.Now().Add(6 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		if ev := podEvents(e, ns, "hog"); strings.Contains(ev, gpushare.EventGPUMemoryOverGrant) {
			t.Fatalf("a container under its grant (3000 of 4096 MiB) was reported:\n%s", ev)
		}
	}
	if !seen() {
		t.Fatalf("the watchdog's reading moved off 3000 MiB while the processes file held it:\n%s", grepLines(scrape(t, e.SharePluginURL+"/metrics"), "gpushare_container_"))
	}

	writeProcessesSM(t, procFile, pid, 6144, 50)
	var events string
	err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(context.Context) (bool, error) {
		events = podEvents(e, ns, "hog")
		return strings.Contains(events, gpushare.EventGPUMemoryOverGrant), nil
	})
	if err != nil {
		t.Fatalf("no %s event for 6144 of 4096 MiB: %v\nevents:\n%s", gpushare.EventGPUMemoryOverGrant, err, events)
	}
	for _, want := range []string{`"c0"`, "6144 MiB", "4096 MiB"} {
		if !strings.Contains(events, want) {
			t.Errorf("the event lacks %q:\n%s", want, events)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := e.Client.CoreV1().Pods(ns).Get(ctx, "hog", metav1.GetOptions{})
		return err == nil && p.Annotations[gpushare.AnnotationOverGrant] != "", nil
	})
	if err != nil {
		t.Errorf("pod not annotated %s: %v", gpushare.AnnotationOverGrant, err)
	}

	metrics := scrape(t, e.SharePluginURL+"/metrics")
	for _, want := range []string{
		fmt.Sprintf(`gpushare_container_gpu_memory_used_bytes{card="0",container="c0",namespace=%q,`, ns),
		fmt.Sprintf(`gpushare_container_gpu_memory_granted_bytes{card="0",container="c0",namespace=%q,`, ns),
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("share-plugin's metrics lack %s…", want)
		}
	}
	if !strings.Contains(metrics, " "+strconv.FormatInt(6144<<20, 10)) && !strings.Contains(metrics, " 6.442450944e+09") {
		t.Errorf("share-plugin's metrics do not report 6144 MiB used:\n%s", grepLines(metrics, "gpushare_container_"))
	}
	checkSMUtilization(ctx, t, e, ns)

	var out string
	err = wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(context.Context) (bool, error) {
		out = kubectlPlugin(t, e, "inspect", "gpushare", "-d", e.RealNode)
		return strings.Contains(out, "used 6GiB"), nil
	})
	if err != nil {
		t.Errorf("kubectl inspect gpushare -d does not show the pod's use (want \"used 6GiB\"): %v\n%s", err, out)
	}
}

// containerPID finds the host PID of the process named comm whose cgroup belongs to the pod
// with the given UID (kubelet names the pod's cgroup by its UID, with '-' or, with the
// systemd driver, '_').
func containerPID(t *testing.T, podUID, comm string) uint32 {
	t.Helper()
	underscored := strings.ReplaceAll(podUID, "-", "_")
	var found uint32
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		dirs, err := os.ReadDir("/proc")
		if err != nil {
			return false, err
		}
		for _, d := range dirs {
			pid, err := strconv.ParseUint(d.Name(), 10, 32)
			if err != nil {
				continue
			}
			c, err := os.ReadFile(filepath.Join("/proc", d.Name(), "comm"))
			if err != nil || strings.TrimSpace(string(c)) != comm {
				continue
			}
			cg, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cgroup"))
			if err == nil && (strings.Contains(string(cg), podUID) || strings.Contains(string(cg), underscored)) {
				found = uint32(pid)
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s process in the cgroup of pod %s: %v", comm, podUID, err)
	}
	return found
}

// writeProcesses makes the simulated card 0 list one process, pid, using usedMiB.
func writeProcesses(t *testing.T, path string, pid uint32, usedMiB int64) {
	t.Helper()
	writeProcessesSM(t, path, pid, usedMiB, -1)
}

// writeProcessesSM is writeProcesses with the process's SM utilisation in percent (negative:
// none, an idle process).
func writeProcessesSM(t *testing.T, path string, pid uint32, usedMiB int64, smUtil int) {
	t.Helper()
	b := fmt.Sprintf("- card: 0\n  pid: %d\n  usedMiB: %d\n", pid, usedMiB)
	if smUtil >= 0 {
		b += fmt.Sprintf("  smUtil: %d\n", smUtil)
	}
	if err := os.WriteFile(path+".tmp", []byte(b), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", url, resp.Status, err)
	}
	return string(b)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// metricValue is the value of the first sample of a Prometheus text exposition whose line
// starts with prefix (a name and the start of its labels), or -1 when there is none.
func metricValue(exposition, prefix string) float64 {
	for _, l := range strings.Split(exposition, "\n") {
		if !strings.HasPrefix(l, prefix) {
			continue
		}
		if i := strings.LastIndexByte(l, ' '); i >= 0 {
			if v, err := strconv.ParseFloat(l[i+1:], 64); err == nil {
				return v
			}
		}
	}
	return -1
}

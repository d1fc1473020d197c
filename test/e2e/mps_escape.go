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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// CaseMPSEscape: share-plugin's usage watchdog on the real node labelled
// gpushare.io/isolation=mps, with one simulated T4 whose MPS daemon folders are ready (no
// daemon runs: no GPU). The simulated card's process list names the host PID of a real
// container granted 4 GiB, first as an MPS client, beside this test's own process as a
// direct one (a process of no pod: counted, not acted on, which shows the watchdog judged
// the card as an MPS card); the pod must not be reported. Then the container's PID is listed
// as a direct process, which bypassed MPS: the watchdog must find the pod from the PID's real
// cgroup, send the GPUMPSEscape event, count it, and evict the pod (--mps-escape-action's
// default).
func CaseMPSEscape(t *testing.T, e *Env) {
	requireRealNode(t, e)
	requireBinary(t, e, "extender", "share-plugin")
	ctx := testContext(t, 5*time.Minute)
	root, _ := startMPSLauncher(t, e)
	procFile := filepath.Join(e.cfg.state, "gpu-processes.yaml")
	t.Cleanup(func() { _ = os.Remove(procFile) })
	// A 2s node resync: the watchdog reads the isolation label that late after the label.
	inv := restartSharePlugin(ctx, t, e, "t4:1", "GPUSHARE_MPS_ROOT="+root, "GPUSHARE_USAGE_INTERVAL=1s", "GPUSHARE_NODE_RESYNC=2s")
	labelNode(ctx, t, e, e.RealNode, string(gpushare.IsolationMPS))
	t.Cleanup(func() { labelNode(context.Background(), t, e, e.RealNode, "") })

	ns := newNamespace(t, e)
	createPod(t, e, gpuPod(ns, "escapee", e.RealNode, ctr{units: 4}))
	p := waitPod(t, e, ns, "escapee", 2*time.Minute, "Running", isRunning)
	pid := containerPID(t, string(p.UID), "gpuenv")

	host := os.Getpid()
	writeMPSProcesses(t, procFile, fmt.Sprintf("- {card: 0, pid: %d, usedMiB: 3000, type: mps}\n- {card: 0, pid: %d, usedMiB: 10, type: direct}\n", pid, host))
	hostSeries := fmt.Sprintf(`gpushare_mps_escapes_total{card="0",namespace="",node=%q,reason=`, e.RealNode)
	var metrics string
	err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(context.Context) (bool, error) {
		metrics = scrape(t, e.SharePluginURL+"/metrics")
		return strings.Contains(metrics, hostSeries), nil
	})
	if err != nil {
		t.Fatalf("this test's process, listed as a direct process on the MPS card, was not counted (%s…): %v\n%s",
			hostSeries, err, grepLines(metrics, "gpushare_mps_escapes_total"))
	}
	// The sample that counted it judged the container's client too; events are sent
	// asynchronously, so a few intervals more of that listing without one.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		if ev := podEvents(e, ns, "escapee"); strings.Contains(ev, gpushare.EventGPUMPSEscape) {
			t.Fatalf("a container listed as an MPS client was reported:\n%s", ev)
		}
	}

	writeMPSProcesses(t, procFile, fmt.Sprintf("- {card: 0, pid: %d, usedMiB: 3000, type: direct}\n", pid))
	var events string
	err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(context.Context) (bool, error) {
		events = podEvents(e, ns, "escapee")
		return strings.Contains(events, gpushare.EventGPUMPSEscape), nil
	})
	if err != nil {
		t.Fatalf("no %s event for a container's direct process on an MPS card: %v\nevents:\n%s", gpushare.EventGPUMPSEscape, err, events)
	}
	for _, want := range []string{fmt.Sprintf("Process %d", pid), `"c0"`, inv.Devices[0].UUID, "evicts the pod"} {
		if !strings.Contains(events, want) {
			t.Errorf("the event lacks %q:\n%s", want, events)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := e.Client.CoreV1().Pods(ns).Get(ctx, "escapee", metav1.GetOptions{})
		return apierrors.IsNotFound(err) || err == nil && p.DeletionTimestamp != nil, nil
	})
	if err != nil {
		t.Errorf("the pod was not evicted: %v\nevents:\n%s", err, podEvents(e, ns, "escapee"))
	}
	podSeries := fmt.Sprintf(`gpushare_mps_escapes_total{card="0",namespace=%q,node=%q,reason="pod"}`, ns, e.RealNode)
	if metrics := scrape(t, e.SharePluginURL+"/metrics"); metricValue(metrics, podSeries) != 1 {
		t.Errorf("share-plugin's metrics lack %s 1:\n%s", podSeries, grepLines(metrics, "gpushare_mps_escapes_total"))
	}
}

// writeMPSProcesses replaces the simulated processes file with body, atomically.
func writeMPSProcesses(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

package dra

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/noderuntime"
	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
	"github.com/gpushare/gpushare/pkg/watchdog"
)

// listedProcesses is an NVML whose cards list the processes given, by card index.
type listedProcesses struct {
	gpunvml.Interface
	procs map[int][]gpunvml.Process
}

func (l listedProcesses) Processes(index int) ([]gpunvml.Process, error) { return l.procs[index], nil }

func (listedProcesses) ProcessUtilization(int) ([]gpunvml.ProcessUtilization, error) {
	return nil, gpunvml.ErrUtilizationUnsupported
}

// writeProcCgroup writes the cgroup file of process pid under root: a process of container
// id of the pod with uid (cgroup v2, systemd driver, containerd).
func writeProcCgroup(t *testing.T, root string, pid int, uid types.UID, id string) {
	t.Helper()
	dir := filepath.Join(root, fmt.Sprint(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cg := "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(string(uid), "-", "_") +
		".slice/cri-containerd-" + id + ".scope\n"
	if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(cg), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRunWatchesClaimUsage: with a usage interval, Run's watchdog charges a claim pod's
// process to its container, granted the claim's units, reports it over its grant, and
// counts a pod without claims using a card as unclaimed, on the plugin's /metrics.
func TestRunWatchesClaimUsage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const gib = 1 << 30
	nbUID, plainUID := types.UID("6f2d2d8e-1c5b-4f4e-9d0a-0a1b2c3d4e5f"), types.UID("0b7e3a52-8c1d-4d2e-a3f4-5b6c7d8e9f00")
	nbCtr, plainCtr := fmt.Sprintf("%064x", 1), fmt.Sprintf("%064x", 2)
	nb := claimPod("nb", map[string]string{"gpu": ""}, refs("gpu"))
	nb.UID = nbUID
	nb.Spec.Containers[0].Name = "main"
	nb.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", ContainerID: "containerd://" + nbCtr}}
	plain := claimPod("plain", nil, nil)
	plain.UID = plainUID
	plain.Spec.Containers = []corev1.Container{{Name: "main"}}
	plain.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", ContainerID: "containerd://" + plainCtr}}
	procRoot := t.TempDir()
	writeProcCgroup(t, procRoot, 100, nbUID, nbCtr)
	writeProcCgroup(t, procRoot, 200, plainUID, plainCtr)

	recorder := record.NewFakeRecorder(10)
	handlers := make(chan http.Handler, 1)
	client, _, done := startRun(t, ctx, map[string]string{gpushare.LabelBackend: string(gpushare.BackendDRA)}, func(rc *runSetup) {
		rc.Serve = func(ctx context.Context, h http.Handler) { handlers <- h; <-ctx.Done() }
		rc.Recorder = recorder
		rc.NVML = listedProcesses{Interface: rc.NVML, procs: map[int][]gpunvml.Process{
			0: {{PID: 100, UsedBytes: 5 * gib, UsedKnown: true}},
			1: {{PID: 200, UsedBytes: 1 * gib, UsedKnown: true}},
		}}
		claims := map[types.UID]PreparedClaim{"claim-uid": prep("nb-gpu", dev("gpu", 0, 4))}
		if err := saveCheckpoint(filepath.Join(rc.PluginDataDir, CheckpointFile), rc.Unit, claims); err != nil {
			t.Fatal(err)
		}
		for _, p := range []*corev1.Pod{nb, plain} {
			if _, err := rc.Client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		factory := informers.NewSharedInformerFactory(rc.Client, 0)
		pods := factory.Core().V1().Pods().Informer()
		factory.Start(ctx.Done())
		rc.Pods = pods
		rc.Usage = noderuntime.Usage{Interval: time.Minute, ProcRoot: procRoot,
			OverGrant: watchdog.OverGrant{Threshold: 0.05}, UnclaimedExemptNamespaces: []string{"kube-system"}}
	})
	awaitDevices(t, ctx, client, func(devs []resourceapi.Device) bool { return len(devs) == 2 })
	srv := httptest.NewServer(<-handlers)
	defer srv.Close()

	want := []struct{ metric, pod, value string }{
		{"gpushare_container_gpu_memory_granted_bytes", "nb", "4.294967296e+09"},
		{"gpushare_container_gpu_memory_used_bytes", "nb", "5.36870912e+09"},
		{"gpushare_pod_unclaimed_gpu_memory_used_bytes", "plain", "1.073741824e+09"},
	}
	var body string
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		_, body = get(t, srv.URL+"/metrics")
		for _, w := range want {
			if !hasSample(body, w.metric, `pod="`+w.pod+`"`, w.value) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("/metrics never showed the claim pod's grant and use and the unclaimed use; last:\n%s", body)
	}
	// Grace 0: the event comes with the first sample over.
	select {
	case ev := <-recorder.Events:
		if !strings.Contains(ev, gpushare.EventGPUMemoryOverGrant) && !strings.Contains(ev, gpushare.EventGPUMemoryUnclaimed) {
			t.Errorf("event %q, want %s or %s", ev, gpushare.EventGPUMemoryOverGrant, gpushare.EventGPUMemoryUnclaimed)
		}
	case <-ctx.Done():
		t.Errorf("no event about the pods using more than they were granted")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after cancel: %v", err)
	}
}

// hasSample reports whether the exposition body has a sample of metric whose labels hold
// label and whose value is value.
func hasSample(body, metric, label, value string) bool {
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, metric+"{") && strings.Contains(line, label) && strings.HasSuffix(line, " "+value) {
			return true
		}
	}
	return false
}

// TestNewUsageWatchdogOnlyWithAnInterval: no interval is no watchdog (and no watchdog
// metrics); an interval is one over the node's cards.
func TestNewUsageWatchdogOnlyWithAnInterval(t *testing.T) {
	d := newTestDriver(t, testConfig(t.TempDir()))
	_, nv, err := gpunvml.Simulate(testNode, "t4:2")
	if err != nil {
		t.Fatal(err)
	}
	for _, interval := range []time.Duration{0, time.Second} {
		n, err := noderuntime.New(noderuntime.Config{Name: testNode, Client: fake.NewClientset(), NVML: nv, Unit: gpushare.GiB,
			Usage: noderuntime.Usage{Interval: interval}})
		if err != nil {
			t.Fatal(err)
		}
		if w := newUsageWatchdog(n, d); (w != nil) != (interval > 0) {
			t.Errorf("interval %v: watchdog %v", interval, w)
		}
	}
}

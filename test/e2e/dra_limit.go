//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/nodecards"
)

// CaseDRALimit: the real node served by the DRA back end (one simulated T4) and labelled
// gpushare.io/isolation=limit. The plugin labels the node gpushare.io/isolation-enforced=limit
// and answers /healthz. A pod whose one claim asks 4 GiB and which sets its own MPS limit and
// grant variables runs, and the limit gpushare-limit-hook recorded for its container's
// cgroup (run by runc from the claim's CDI spec) is the claim's 4 GiB, not what its env says,
// and so is the one for the pod's cgroup;
// the plugin's metrics count the claim's memory on the card.
func CaseDRALimit(t *testing.T, e *Env) {
	requireRealNode(t, e)
	requireDRAKubernetes(t, e)
	requireBinary(t, e, "share-plugin", "gpushare-limit-hook")
	ctx := testContext(t, 5*time.Minute)
	// Labelled before the plugin starts, which publishes what it enforces at start. The
	// label goes while the plugin still runs (cleanups run last first), and again in case
	// the plugin never started.
	unlabel := func() { labelNode(context.Background(), t, e, e.RealNode, "") }
	labelNode(ctx, t, e, e.RealNode, string(gpushare.IsolationLimit))
	t.Cleanup(unlabel)
	startDRAPlugin(ctx, t, e, filepath.Join(t.TempDir(), "faults"))
	t.Cleanup(unlabel)
	waitFor(ctx, t, 30*time.Second, "node labelled "+gpushare.LabelIsolationEnforced+"=limit", func() bool {
		n, err := e.Client.CoreV1().Nodes().Get(ctx, e.RealNode, metav1.GetOptions{})
		return err == nil && n.Labels[gpushare.LabelIsolationEnforced] == string(gpushare.IsolationLimit)
	})
	metrics := sharePluginMetricsURL(t, e)
	if code, body := httpGet(ctx, t, metrics+"/healthz"); code != http.StatusOK {
		t.Errorf("the DRA plugin's /healthz = %d %q, want 200 once registered and published", code, body)
	}

	// kube-system: deploy/admission's policy exempts it, so the pod's own variables reach
	// the runtime.
	ns, name := metav1.NamespaceSystem, "e2e-dra-limit-"+rand.String(5)
	p := startClaimPod(ctx, t, e, ns, name, "4Gi", []corev1.EnvVar{
		{Name: gpushare.EnvMPSPinnedMemLimit, Value: "0=99999M"},
		{Name: gpushare.EnvContainerUnits, Value: "14"},
	})
	if len(p.Status.ContainerStatuses) != 1 {
		t.Fatalf("container statuses %+v", p.Status.ContainerStatuses)
	}
	_, id, _ := strings.Cut(p.Status.ContainerStatuses[0].ContainerID, "://")
	cardDir := nodecards.SimulatedCardDir(filepath.Join(e.cfg.state, "cdi"))
	const want = uint64(4) << 30
	if r, ok := hookRecord(t, cardDir, draCardUUID(ctx, t, e), id); ok && (r.HardLimitBytes != want || !strings.Contains(r.Cgroup, id)) {
		t.Errorf("recorded limit %d bytes for cgroup %s, want the claim's %d bytes (4 GiB) for the container's cgroup", r.HardLimitBytes, r.Cgroup, want)
	}
	// The claim is the pod's only one: the pod's cgroup gets the claim's memory too.
	if r, ok := podHookRecord(t, cardDir, draCardUUID(ctx, t, e), string(p.UID)); ok && r.HardLimitBytes != want {
		t.Errorf("recorded limit %d bytes for the pod's cgroup %s, want the pod's claims' %d bytes (4 GiB)", r.HardLimitBytes, r.Cgroup, want)
	}

	_, body := httpGet(ctx, t, metrics+"/metrics")
	for _, line := range []string{
		fmt.Sprintf(`gpushare_dra_card_prepared_claims{index="0",model="Tesla T4",node=%q,uuid=%q} 1`, e.RealNode, draCardUUID(ctx, t, e)),
		fmt.Sprintf(`gpushare_dra_card_prepared_memory_bytes{index="0",model="Tesla T4",node=%q,uuid=%q} 4.294967296e+09`, e.RealNode, draCardUUID(ctx, t, e)),
	} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("the DRA plugin's /metrics lacks %q", line)
		}
	}
}

// startClaimPod creates the claim name in ns asking memory of one card of the driver and
// the pod name on the real node whose one container c0 (with env) names it, and waits until
// the pod runs. Cleanups delete both and wait until the plugin has unprepared every claim:
// they run before the plugin stops, which kubelet needs to unprepare.
func startClaimPod(ctx context.Context, t *testing.T, e *Env, ns, name, memory string, env []corev1.EnvVar) *corev1.Pod {
	t.Helper()
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: gpushare.DRADriverName, Capacity: &resourcev1.CapacityRequirements{
				Requests: map[resourcev1.QualifiedName]resource.Quantity{gpushare.DRACapacityMemory: resource.MustParse(memory)},
			}},
		}}}},
	}
	if _, err := e.Client.ResourceV1().ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating claim %s/%s: %v", ns, name, err)
	}
	// Before the plugin stops: kubelet unprepares the claim only through a running plugin.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		deletePodAndWait(e, ns, name)
		_ = e.Client.ResourceV1().ResourceClaims(ns).Delete(ctx, name, metav1.DeleteOptions{})
		waitFor(ctx, t, time.Minute, "every claim unprepared", func() bool { return len(readDRACheckpoint(t)) == 0 })
	})
	p := gpuPod(ns, name, e.RealNode)
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &name}}
	p.Spec.Containers = []corev1.Container{{
		Name: "c0", Image: testImage, ImagePullPolicy: corev1.PullNever,
		Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}},
		Env:       env,
	}}
	createPod(t, e, p)
	return waitPod(t, e, ns, name, 2*time.Minute, "Running", isRunning)
}

// sharePluginMetricsURL is the local share-plugin's --metrics-address (hack/lib/ports.sh).
func sharePluginMetricsURL(t *testing.T, e *Env) string {
	t.Helper()
	for _, kv := range e.cfg.scriptEnv {
		if port, ok := strings.CutPrefix(kv, "GPUSHARE_SHARE_PLUGIN_METRICS_PORT="); ok {
			return "http://127.0.0.1:" + port
		}
	}
	t.Fatal("hack/lib/ports.sh printed no GPUSHARE_SHARE_PLUGIN_METRICS_PORT")
	return ""
}

// httpGet is url's status and body (0 and the error's text when it cannot be read).
func httpGet(ctx context.Context, t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err.Error()
	}
	return resp.StatusCode, string(b)
}

//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilversion "k8s.io/apimachinery/pkg/util/version"

	"github.com/gpushare/gpushare/pkg/dra"
	"github.com/gpushare/gpushare/pkg/gpushare"
)

// draCheckpoint is where share-plugin --backend=dra keeps its prepared claims on the real
// node: kubelet's default plugin folder for the driver.
var draCheckpoint = filepath.Join("/var/lib/kubelet/plugins", gpushare.DRADriverName, dra.CheckpointFile)

// CaseDRABackend: the real node switched to the DRA back end (one simulated T4, 14 GiB).
// The reference notebooks as claims from deploy/dra/examples' 4 GiB template: three Running
// (the third scheduled by gpushare-scheduler, bound without card annotations), each
// container given the card by the claim's CDI spec, the fourth Pending with
// kube-scheduler's DRA reason; kubectl inspect gpushare shows 12/14 (85%) and -d names
// each claim and its pod. A plugin restart keeps the prepared claims (checkpoint read
// back, the pods keep running) and prepares the fourth's claim once a notebook goes. A card
// fallen off the bus taints its device and a new claim stays Pending until it recovers.
func CaseDRABackend(t *testing.T, e *Env) {
	requireRealNode(t, e)
	requireDRAKubernetes(t, e)
	requireBinary(t, e, "share-plugin", "gpushare-scheduler")
	ctx := testContext(t, 10*time.Minute)
	faults := filepath.Join(t.TempDir(), "faults")
	env := startDRAPlugin(ctx, t, e, faults)
	ns := newNamespace(t, e)
	// Before the plugin stops (cleanups run last first): kubelet unprepares the claims of
	// the namespace's pods only through a running plugin.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = e.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		waitFor(ctx, t, time.Minute, "every claim unprepared", func() bool { return len(readDRACheckpoint(t)) == 0 })
	})

	tmpl := draNotebookTemplate(ctx, t, e, ns)
	// nb-3 goes through gpushare-scheduler (GPUShare scores claim pods, DynamicResources
	// allocates them), the others through kube-scheduler.
	notebook := func(name string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: tmpl.Labels}, Spec: *tmpl.Spec.DeepCopy()}
		p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: e.RealNode}
		if name == "nb-3" {
			p.Spec.SchedulerName = PluginSchedulerName
		}
		return p
	}

	uuid := draCardUUID(ctx, t, e)
	running := []string{"nb-1", "nb-2", "nb-3"}
	for _, name := range running {
		createPod(t, e, notebook(name))
		waitPod(t, e, ns, name, 2*time.Minute, "Running", isRunning)
	}
	// gpushare-scheduler leaves a claim pod's filtering, reservation and binding to
	// DynamicResources and DefaultBinder: its Binding carries no card annotations.
	if p := waitPod(t, e, ns, "nb-3", time.Second, "Running", isRunning); p.Annotations[gpushare.AnnotationIndex] != "" {
		t.Errorf("nb-3, scheduled by %s, was bound with gpushare's card annotations: %v", PluginSchedulerName, p.Annotations)
	}
	createPod(t, e, notebook("nb-4"))
	msg := waitFailedScheduling(t, e, ns, "nb-4", "cannot allocate all claims")
	t.Logf("nb-4 is Pending: %s", msg)

	t.Run("each notebook's container is given the card and 4 units by its claim", func(t *testing.T) {
		for _, name := range running {
			logs := containerLogs(t, e, ns, name, tmpl.Spec.Containers[0].Name)
			for _, want := range []string{
				"GPUSHARE_SIMULATED_GPUS=" + uuid,
				gpushare.EnvVisibleDevices + "=" + uuid,
				gpushare.EnvContainerUnits + "=4",
			} {
				if !strings.Contains(logs, want+"\n") {
					t.Errorf("pod %s: log lacks %q; log:\n%s", name, want, logs)
				}
			}
		}
	})

	t.Run("kubectl inspect gpushare shows the claims at 12/14 (85%)", func(t *testing.T) {
		requireBinary(t, e, "kubectl-inspect-gpushare")
		if out := kubectlPlugin(t, e, "inspect", "gpushare", e.RealNode); !strings.Contains(out, "12/14 (85%)") {
			t.Errorf("kubectl inspect gpushare %s lacks \"12/14 (85%%)\":\n%s", e.RealNode, out)
		}
		out := kubectlPlugin(t, e, "inspect", "gpushare", "-d", e.RealNode)
		for _, name := range running {
			p, err := e.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Status.ResourceClaimStatuses) != 1 || p.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
				t.Fatalf("pod %s: claim statuses %+v, want one generated claim", name, p.Status.ResourceClaimStatuses)
			}
			claim := ns + "/" + *p.Status.ResourceClaimStatuses[0].ResourceClaimName
			line := regexp.MustCompile(`(?m)` + regexp.QuoteMeta(claim) + `\s+GPU0 4\s+` + regexp.QuoteMeta(ns+"/"+name) + `$`)
			if !line.MatchString(out) {
				t.Errorf("kubectl inspect gpushare -d %s does not name claim %s of pod %s with GPU0 4:\n%s", e.RealNode, claim, name, out)
			}
		}
		if !strings.Contains(out, "12 (85%)") {
			t.Errorf("kubectl inspect gpushare -d %s lacks \"12 (85%%)\":\n%s", e.RealNode, out)
		}
	})

	t.Run("the plugin's /prepared lists each notebook's claim with 4 units of card 0", func(t *testing.T) {
		code, body := httpGet(ctx, t, sharePluginMetricsURL(t, e)+gpushare.DRAPreparedPath)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", gpushare.DRAPreparedPath, code, body)
		}
		var r gpushare.DRAPreparedReport
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatalf("decoding %s: %v: %s", gpushare.DRAPreparedPath, err, body)
		}
		held := map[string]gpushare.DRAPreparedClaim{}
		for _, c := range r.Claims {
			held[string(c.UID)] = c
		}
		for _, name := range running {
			p, err := e.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil || len(p.Status.ResourceClaimStatuses) != 1 || p.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
				t.Fatalf("pod %s: %v, claim statuses %+v", name, err, p.Status.ResourceClaimStatuses)
			}
			claim, err := e.Client.ResourceV1().ResourceClaims(ns).Get(ctx, *p.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			c, ok := held[string(claim.UID)]
			if !ok || c.Namespace != ns || c.Name != claim.Name || len(c.Cards) != 1 || c.Cards[0] != 4 {
				t.Errorf("claim %s/%s (uid %s): %s holds %+v, want it with {0:4}; answer %s", ns, claim.Name, claim.UID, gpushare.DRAPreparedPath, c, body)
			}
		}
		if r.Node != e.RealNode || len(r.Claims) != len(running) {
			t.Errorf("%s = %s, want node %s and %d claims", gpushare.DRAPreparedPath, body, e.RealNode, len(running))
		}
	})

	t.Run("a plugin restart keeps the prepared claims", func(t *testing.T) {
		before := readDRACheckpoint(t)
		if len(before) != 3 {
			t.Fatalf("checkpoint %s holds %d claims, want 3: %v", draCheckpoint, len(before), before)
		}
		stopDRAPlugin(ctx, t, e)
		startDRAPluginProc(ctx, t, e, env)
		if after := readDRACheckpoint(t); len(after) != 3 {
			t.Fatalf("checkpoint after the restart holds %d claims, want 3: %v", len(after), after)
		}
		// A graceful delete: kubelet unprepares the claim before the pod goes, so nb-4's
		// claim is allocated only once the plugin no longer counts nb-1's memory.
		deletePod(t, e, ns, "nb-1")
		waitPod(t, e, ns, "nb-4", 2*time.Minute, "Running once nb-1's memory is free", isRunning)
		for _, name := range []string{"nb-2", "nb-3"} {
			if p := waitPod(t, e, ns, name, time.Second, "Running", isRunning); restarts(p) != 0 {
				t.Errorf("pod %s restarted %d times across the plugin restart", name, restarts(p))
			}
		}
		if got := readDRACheckpoint(t); len(got) != 3 {
			t.Errorf("checkpoint holds %d claims with nb-2, nb-3 and nb-4 running, want 3: %v", len(got), got)
		}
	})

	t.Run("a card fallen off the bus taints its device and a new claim waits", func(t *testing.T) {
		for _, name := range []string{"nb-2", "nb-3", "nb-4"} {
			deletePod(t, e, ns, name)
		}
		waitFor(ctx, t, time.Minute, "every claim unprepared", func() bool { return len(readDRACheckpoint(t)) == 0 })
		if err := os.WriteFile(faults, []byte("0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		waitFor(ctx, t, time.Minute, "gpu-0 tainted NoExecute", func() bool {
			return draTaint(ctx, e) == resourcev1.DeviceTaintEffectNoExecute
		})
		createPod(t, e, notebook("nb-5"))
		msg := waitFailedScheduling(t, e, ns, "nb-5", "cannot allocate all claims")
		t.Logf("nb-5 is Pending on the tainted card: %s", msg)
		if err := os.WriteFile(faults, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		waitFor(ctx, t, time.Minute, "gpu-0's taint gone after recovery", func() bool { return draTaint(ctx, e) == "" })
		waitPod(t, e, ns, "nb-5", 2*time.Minute, "Running once the card recovered", isRunning)
	})
}

// requireDRAKubernetes skips a DRA case on a control plane older than Kubernetes 1.36:
// share-plugin --backend=dra refuses to start there (no consumable capacity).
func requireDRAKubernetes(t *testing.T, e *Env) {
	t.Helper()
	v, err := utilversion.ParseGeneric(serverVersion(t, e))
	if err != nil {
		t.Fatalf("reading the server version: %v", err)
	}
	if !v.AtLeast(utilversion.MajorMinor(1, 36)) {
		t.Skipf("Kubernetes %s: the DRA back end needs 1.36 or later; share-plugin --backend=dra refuses to start", v)
	}
}

// startDRAPlugin labels the real node for the DRA back end, installs the DeviceClass and
// runs share-plugin --backend=dra with one simulated T4, faultsFile and the variables in
// extraEnv, and returns the plugin's environment for restarts. At the end the node goes back
// to the device plugin.
func startDRAPlugin(ctx context.Context, t *testing.T, e *Env, faultsFile string, extraEnv ...string) []string {
	t.Helper()
	for _, o := range decodeObjects(t, filepath.Join(e.Repo(), "deploy", "dra", "deviceclass.yaml")) {
		if err := serverSideApply(ctx, e, o, false); err != nil {
			t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	env := []string{"GPUSHARE_SIMULATE=t4:1", "GPUSHARE_BACKEND=dra",
		"GPUSHARE_SIMULATE_FAULTS_FILE=" + faultsFile, "GPUSHARE_HEALTH_RECOVERY=3s"}
	env = append(env, extraEnv...)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		stopDRAPlugin(ctx, t, e)
		setBackendLabel(ctx, t, e, nil)
		_ = e.Client.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{},
			metav1.ListOptions{FieldSelector: "spec.driver=" + gpushare.DRADriverName})
		if err := e.StartComponent(ctx, "share-plugin"); err != nil {
			t.Errorf("restoring share-plugin: %v", err)
			return
		}
		waitFor(ctx, t, 90*time.Second, "kubelet to read the restored share-plugin's devices", func() bool {
			return listAndWatchStreams(ctx, e.SharePluginURL) > 0
		})
	})
	// The DRA plugin refuses to start while the device plugin's pods hold memory on the
	// node: earlier cases' pods may still be terminating with their namespaces.
	waitFor(ctx, t, 2*time.Minute, "no pod on the real node to hold "+string(res.Mem), func() bool {
		return len(gpuMemPodsOnRealNode(ctx, t, e)) == 0
	})
	if err := e.StopComponent(ctx, "share-plugin"); err != nil {
		t.Fatalf("stopping the device plugin: %v", err)
	}
	dra := string(gpushare.BackendDRA)
	setBackendLabel(ctx, t, e, &dra)
	startDRAPluginProc(ctx, t, e, env)
	return env
}

// draNotebookTemplate applies deploy/dra/examples/tf-notebook-claims.yaml's
// ResourceClaimTemplate in ns and returns its Deployment's pod template, whose pods each take
// a claim from it.
func draNotebookTemplate(ctx context.Context, t *testing.T, e *Env, ns string) corev1.PodTemplateSpec {
	t.Helper()
	objs := decodeObjects(t, filepath.Join(e.Repo(), "deploy", "dra", "examples", "tf-notebook-claims.yaml"))
	var tmpl corev1.PodTemplateSpec
	for _, o := range objs {
		switch o.GetKind() {
		case "ResourceClaimTemplate":
			o.SetNamespace(ns)
			if err := serverSideApply(ctx, e, o, false); err != nil {
				t.Fatalf("applying the ResourceClaimTemplate %s: %v", o.GetName(), err)
			}
		case "Deployment":
			var d appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
				t.Fatalf("decoding the example Deployment: %v", err)
			}
			tmpl = d.Spec.Template
		}
	}
	if len(tmpl.Spec.ResourceClaims) == 0 {
		t.Fatal("deploy/dra/examples/tf-notebook-claims.yaml: no Deployment whose pod takes a claim")
	}
	return tmpl
}

// gpuMemPodsOnRealNode names the pods bound to the real node, not finished, whose
// containers ask for gpu-mem.
func gpuMemPodsOnRealNode(ctx context.Context, t *testing.T, e *Env) []string {
	t.Helper()
	l, err := e.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + e.RealNode})
	if err != nil {
		t.Logf("listing the real node's pods: %v", err)
		return []string{"(unknown)"}
	}
	var out []string
	for _, p := range l.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			if _, ok := c.Resources.Limits[res.Mem]; ok {
				out = append(out, p.Namespace+"/"+p.Name)
				break
			}
			if _, ok := c.Resources.Requests[res.Mem]; ok {
				out = append(out, p.Namespace+"/"+p.Name)
				break
			}
		}
	}
	return out
}

// draRegistrationSocket is the plugin's registration socket in kubelet's folder.
var draRegistrationSocket = filepath.Join("/var/lib/kubelet/plugins_registry", gpushare.DRADriverName+"-reg.sock")

// startDRAPluginProc starts share-plugin with env and waits until kubelet has registered
// it: a claim kubelet prepares before that fails, and kubelet retries it only after its
// pod backoff.
func startDRAPluginProc(ctx context.Context, t *testing.T, e *Env, env []string) {
	t.Helper()
	if err := e.StartComponent(ctx, "share-plugin", env...); err != nil {
		t.Fatalf("starting share-plugin --backend=dra: %v", err)
	}
	waitFor(ctx, t, time.Minute, "kubelet to register the DRA plugin", func() bool { return kubeletRegistered(ctx, t) })
}

// stopDRAPlugin stops share-plugin and waits until kubelet has unregistered it, so that a
// later registration is the next process's.
func stopDRAPlugin(ctx context.Context, t *testing.T, e *Env) {
	t.Helper()
	if err := e.StopComponent(ctx, "share-plugin"); err != nil {
		t.Fatalf("stopping share-plugin: %v", err)
	}
	waitFor(ctx, t, time.Minute, "kubelet to unregister the DRA plugin", func() bool { return !kubeletRegistered(ctx, t) })
}

// kubeletRegistered reports whether kubelet's plugin manager holds the DRA plugin's
// registration socket as registered (its plugin_manager_total_plugins metric, state
// actual_state_of_world). The local kubelet serves /metrics to anyone on 127.0.0.1.
func kubeletRegistered(ctx context.Context, t *testing.T) bool {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:10250/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The local kubelet's serving certificate is self-signed; nothing secret is read.
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Do(req)
	if err != nil {
		t.Logf("reading kubelet's metrics: %v", err)
		return false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Logf("reading kubelet's metrics: status %d, %v", resp.StatusCode, err)
		return false
	}
	want := fmt.Sprintf(`plugin_manager_total_plugins{socket_path=%q,state="actual_state_of_world"} 1`, draRegistrationSocket)
	for _, l := range strings.Split(string(b), "\n") {
		if l == want {
			return true
		}
	}
	return false
}

// setBackendLabel sets the real node's back-end label to value, or removes it (nil).
func setBackendLabel(ctx context.Context, t *testing.T, e *Env, value *string) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]*string{gpushare.LabelBackend: value}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.CoreV1().Nodes().Patch(ctx, e.RealNode, "application/merge-patch+json", body, metav1.PatchOptions{}); err != nil {
		t.Errorf("labelling node %s %s=%v: %v", e.RealNode, gpushare.LabelBackend, value, err)
	}
}

// draSlice is the real node's ResourceSlice of the driver, waiting up to a minute for it.
func draSlice(ctx context.Context, t *testing.T, e *Env) *resourcev1.ResourceSlice {
	t.Helper()
	var got *resourcev1.ResourceSlice
	waitFor(ctx, t, time.Minute, "the node's ResourceSlice", func() bool {
		got = nodeSlice(ctx, e)
		return got != nil
	})
	return got
}

// nodeSlice is the real node's ResourceSlice of the driver with one device, or nil.
func nodeSlice(ctx context.Context, e *Env) *resourcev1.ResourceSlice {
	l, err := e.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
		FieldSelector: fmt.Sprintf("spec.nodeName=%s,spec.driver=%s", e.RealNode, gpushare.DRADriverName),
	})
	if err != nil || len(l.Items) != 1 || len(l.Items[0].Spec.Devices) != 1 {
		return nil
	}
	return &l.Items[0]
}

// draCardUUID is the UUID the node's one card device publishes.
func draCardUUID(ctx context.Context, t *testing.T, e *Env) string {
	t.Helper()
	s := draSlice(ctx, t, e)
	a, ok := s.Spec.Devices[0].Attributes[gpushare.DRAAttributeUUID]
	if !ok || a.StringValue == nil {
		t.Fatalf("device %s of slice %s has no %s attribute", s.Spec.Devices[0].Name, s.Name, gpushare.DRAAttributeUUID)
	}
	return *a.StringValue
}

// draTaint is the effect of the card device's unhealthy taint ("" when it has none or the
// slice cannot be read).
func draTaint(ctx context.Context, e *Env) resourcev1.DeviceTaintEffect {
	s := nodeSlice(ctx, e)
	if s == nil {
		return ""
	}
	for _, tn := range s.Spec.Devices[0].Taints {
		if tn.Key == gpushare.DRATaintUnhealthy {
			return tn.Effect
		}
	}
	return ""
}

// readDRACheckpoint is the claims in the plugin's checkpoint, by UID; none before the
// plugin's first prepare wrote it.
func readDRACheckpoint(t *testing.T) map[string]dra.PreparedClaim {
	t.Helper()
	b, err := os.ReadFile(draCheckpoint)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatalf("reading the DRA checkpoint: %v", err)
	}
	var c struct {
		Claims map[string]dra.PreparedClaim `json:"claims"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("decoding the DRA checkpoint %s: %v", draCheckpoint, err)
	}
	return c.Claims
}

// restarts is the sum of the pod's containers' restart counts.
func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}

package dra

import (
	"context"
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
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/noderuntime"
	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

// nodeConfig names the node's Config beside the plugin's in runSetup.
type nodeConfig = noderuntime.Config

// runSetup is what startRun builds the back end from: the node's Config and the plugin's.
type runSetup struct {
	nodeConfig
	Config
}

// startRun runs Run on a simulated node of two T4s, labelled with labels, with each of
// opts applied to its configuration, and returns the fake API, the simulator and Run's
// result (or the error of noderuntime.New or New).
func startRun(t *testing.T, ctx context.Context, labels map[string]string, opts ...func(*runSetup)) (*fake.Clientset, *gpunvml.Simulator, <-chan error) {
	t.Helper()
	sim, nv, err := gpunvml.Simulate(testNode, "t4:2")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	reg := filepath.Join(dir, "registry")
	if err := os.MkdirAll(reg, 0o750); err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, Labels: labels}})
	fakeAPIServer(client, "v1.36.3", resourceV1("resourceslices", "resourceclaims"))
	echoDryRunSlices(client, func(*resourceapi.ResourceSlice) {})
	done := make(chan error, 1)
	rc := runSetup{
		Config: Config{
			CDISpecDir: filepath.Join(dir, "cdi"), PluginDataDir: filepath.Join(dir, "data"), RegistrarDir: reg,
		},
	}
	rc.Name, rc.Client, rc.NVML, rc.Unit, rc.Simulated = testNode, client, nv, gpushare.GiB, true
	rc.HealthRecovery, rc.Clock = time.Hour, clocktesting.NewFakeClock(time.Now())
	for _, o := range opts {
		o(&rc)
	}
	go func() { done <- run(ctx, rc) }()
	return client, sim, done
}

// run builds the node and the plugin of rc and runs it.
func run(ctx context.Context, rc runSetup) error {
	node, err := noderuntime.New(rc.nodeConfig)
	if err != nil {
		return err
	}
	p, err := New(rc.Config, node)
	if err != nil {
		return err
	}
	return p.Run(ctx)
}

// awaitDevices polls the published ResourceSlices until ok accepts their devices.
func awaitDevices(t *testing.T, ctx context.Context, client *fake.Clientset, ok func([]resourceapi.Device) bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var devs []resourceapi.Device
		for _, s := range list.Items {
			if s.Spec.Driver == gpushare.DRADriverName {
				devs = append(devs, s.Spec.Devices...)
			}
		}
		return ok(devs), nil
	})
	if err != nil {
		t.Fatalf("the published devices never became what the test waits for: %v", err)
	}
}

// TestRunPublishesAndTaints: Run publishes a device per card and, after a card falls off
// the bus, taints it NoExecute.
func TestRunPublishesAndTaints(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, sim, done := startRun(t, ctx, map[string]string{gpushare.LabelBackend: string(gpushare.BackendDRA)})
	awaitDevices(t, ctx, client, func(devs []resourceapi.Device) bool {
		return len(devs) == 2 && len(devs[0].Taints) == 0 && len(devs[1].Taints) == 0
	})
	if err := sim.InjectXID(0, gpunvml.XIDFallenOffBus); err != nil {
		t.Fatal(err)
	}
	awaitDevices(t, ctx, client, func(devs []resourceapi.Device) bool {
		for _, d := range devs {
			if d.Name == "gpu-0" && len(d.Taints) == 1 && d.Taints[0].Effect == resourceapi.DeviceTaintEffectNoExecute {
				return true
			}
		}
		return false
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after cancel: %v", err)
	}
}

// TestRunRefusesADevicePluginNode: a node not labelled for DRA is the device plugin's.
func TestRunRefusesADevicePluginNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, done := startRun(t, ctx, nil)
	if err := <-done; err == nil || !strings.Contains(err.Error(), gpushare.LabelBackend) {
		t.Errorf("Run on an unlabelled node: %v, want it refused naming %s", err, gpushare.LabelBackend)
	}
}

// TestRunRefusesKubernetes135: on a 1.35 API server, which would drop the fields that let
// claims share a card, Run stops before registering with kubelet or publishing a slice.
func TestRunRefusesKubernetes135(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, _, done := startRun(t, ctx, map[string]string{gpushare.LabelBackend: string(gpushare.BackendDRA)},
		func(rc *runSetup) {
			fakeAPIServer(rc.Client.(*fake.Clientset), "v1.35.4", resourceV1("resourceslices"))
		})
	if err := <-done; err == nil || !strings.Contains(err.Error(), "needs Kubernetes 1.36 or later") {
		t.Errorf("Run on 1.35: %v, want it refused", err)
	}
	if list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) != 0 {
		t.Errorf("slices after the refusal: %v, %v; want none", list, err)
	}
}

// TestRunServesProbes: Run hands its handler to Serve and labels the node with the isolation
// it enforces; with no kubelet to register it, /healthz fails though the slice is published.
func TestRunServesProbes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	handlers := make(chan http.Handler, 1)
	serve := func(ctx context.Context, h http.Handler) {
		handlers <- h
		<-ctx.Done()
	}
	client, _, done := startRun(t, ctx, map[string]string{gpushare.LabelBackend: string(gpushare.BackendDRA), gpushare.LabelIsolation: "limit"},
		func(rc *runSetup) { rc.Serve = serve })
	awaitDevices(t, ctx, client, func(devs []resourceapi.Device) bool { return len(devs) == 2 })
	srv := httptest.NewServer(<-handlers)
	defer srv.Close()
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, body := get(t, srv.URL+"/metrics")
		return strings.Contains(body, `gpushare_dra_slice_published{node="node-a"} 1`+"\n"), nil
	})
	if err != nil {
		t.Errorf("/metrics never said the slice is published")
	}
	if code, body := get(t, srv.URL+"/healthz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not registered with kubelet") {
		t.Errorf("/healthz without kubelet = %d %q, want 503 not registered", code, body)
	}
	if got := enforcedLabel(ctx, t, client); got != "limit" {
		t.Errorf("%s = %q, want limit", gpushare.LabelIsolationEnforced, got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after cancel: %v", err)
	}
}

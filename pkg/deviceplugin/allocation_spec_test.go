package deviceplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	oci "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/limithook"
	"github.com/gpushare/gpushare/pkg/nodecards"
)

// withAllocationSpecs switches the env's plugin to the cdi-allocation strategy over a fresh
// CDI spec folder, with the simulated cards' files there when simulated (else real cards:
// device nodes), and returns the folder.
func (e *testEnv) withAllocationSpecs(t *testing.T, simulated bool) string {
	t.Helper()
	dir := t.TempDir()
	e.plugin.cfg.DeviceListStrategy = DeviceListCDIAllocation
	e.plugin.cfg.CDISpecDir = dir
	e.plugin.cfg.CDIRegistryDirs = []string{dir} // not the test machine's /etc/cdi
	if simulated {
		if _, err := nodecards.WriteSimulatedCDISpec(dir, nodecards.DefaultCDIKind, e.plugin.Cards()); err != nil {
			t.Fatal(err)
		}
		e.plugin.cfg.SimulatedCardDir = nodecards.SimulatedCardDir(dir)
	}
	return dir
}

// tenantEnv is what a hostile pod sets in its own env to widen its cards and its grant.
var tenantEnv = []string{
	gpushare.EnvVisibleDevices + "=all",
	envCUDAVisibleDevices + "=0,1,2,3",
	gpushare.EnvContainerUnits + "=14",
	gpushare.EnvMPSPinnedMemLimit + "=0=99999M",
	gpushare.EnvMPSPipeDirectory + "=/tmp/mine",
}

// writeNVIDIASpec writes into dir a CDI spec of kind nodecards.DefaultCDIKind as
// `nvidia-ctk cdi generate --device-name-strategy=uuid` shapes it for the env's first n
// cards: a device per card UUID with its device node, and spec-wide edits with the control
// node, a driver library's mount and NVIDIA_VISIBLE_DEVICES=void. Device nodes carry their
// type and numbers, so that the CDI library injects them without a GPU on the machine.
func writeNVIDIASpec(t *testing.T, dir string, n int) {
	t.Helper()
	spec := map[string]any{
		"cdiVersion": "0.5.0",
		"kind":       nodecards.DefaultCDIKind,
		"containerEdits": map[string]any{
			"env":         []string{gpushare.EnvVisibleDevices + "=void"},
			"deviceNodes": []map[string]any{{"path": "/dev/nvidiactl", "type": "c", "major": 195, "minor": 255}},
			"mounts":      []map[string]any{{"hostPath": "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "containerPath": "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "options": []string{"ro", "nosuid", "nodev", "bind"}}},
		},
	}
	var devices []map[string]any
	for i := range n {
		devices = append(devices, map[string]any{"name": uuid(i), "containerEdits": map[string]any{
			"deviceNodes": []map[string]any{{"path": fmt.Sprintf("/dev/nvidia%d", i), "type": "c", "major": 195, "minor": i}},
		}})
	}
	spec["devices"] = devices
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nvidia.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// containerEnvAfterCDI is the environment the container's process starts with when the
// runtime injects devices, in the order given, into an OCI spec that already holds the
// image's and the pod's env (tenantEnv), as containerd's CRI does (env first, CDI devices
// last, in one InjectDevices call), with the CDI library runtimes use; duplicates resolve
// as runc's prepareEnv does, the last value of a key wins.
func containerEnvAfterCDI(t *testing.T, dir string, devices ...string) (map[string]string, *oci.Spec) {
	t.Helper()
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(dir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		t.Fatalf("loading the CDI specs: %v", err)
	}
	if errs := cache.GetErrors(); len(errs) > 0 {
		t.Fatalf("CDI errors: %v", errs)
	}
	spec := &oci.Spec{Process: &oci.Process{Env: append([]string{"PATH=/usr/bin", gpushare.EnvVisibleDevices + "=all"}, tenantEnv...)}, Linux: &oci.Linux{}}
	if unresolved, err := cache.InjectDevices(spec, devices...); err != nil {
		t.Fatalf("injecting %v: %v (unresolved %v)", devices, err, unresolved)
	}
	out := map[string]string{}
	for _, kv := range spec.Process.Env {
		k, v, _ := strings.Cut(kv, "=")
		out[k] = v
	}
	return out, spec
}

// TestAllocateCDIAllocation: with cdi-allocation the answer names the runtime's own CDI
// device of each card that has one (simulated cards' spec, NVIDIA's spec by UUID), then one
// CDI device of this allocation, and sets no variable; the allocation's spec, written
// before the answer, holds the cards without a runtime device and the variables Allocate
// hands over, validates with the CDI library's reader, and, injected in the answer's order
// after a tenant's env, wins over it and over NVIDIA's NVIDIA_VISIBLE_DEVICES=void.
func TestAllocateCDIAllocation(t *testing.T) {
	tests := []struct {
		name      string
		ctrs      []ctr
		alloc     gpushare.PodAllocation
		units     int
		simulated bool
		mps       bool
		nvidia    int               // cards of NVIDIA's spec written (writeNVIDIASpec)
		wantCDI   []string          // the runtime's devices named before the allocation's
		wantEnv   map[string]string // the container's env, after the tenant's
		wantNodes []string          // the allocation spec's device nodes (real cards)
		wantFiles []string          // mounted files, each once (simulated cards, NVIDIA's library)
	}{
		{
			name: "simulated, one card", ctrs: []ctr{{name: "main", units: 6}}, alloc: app(gpushare.CardUnits{1: 6}), units: 6, simulated: true,
			wantEnv: map[string]string{
				gpushare.EnvVisibleDevices: uuid(1), envCUDAVisibleDevices: uuid(1), gpushare.EnvIndex: "1",
				gpushare.EnvContainerUnits: "6", gpushare.EnvPodUnits: "6", gpushare.EnvDevUnits: "14",
				// Not an MPS node: the tenant's MPS variables stay, and no daemon reads them.
				gpushare.EnvMPSPinnedMemLimit: "0=99999M", gpushare.EnvMPSPipeDirectory: "/tmp/mine",
			},
			wantCDI:   []string{nodecards.DefaultCDIKind + "=" + uuid(1)},
			wantFiles: []string{gpushare.SimulatedGPUDir + "/" + uuid(1)},
		},
		{
			name: "simulated, two cards", ctrs: []ctr{{name: "main", units: 8, cards: 2}}, alloc: app(gpushare.CardUnits{0: 4, 1: 4}), units: 8, simulated: true,
			wantEnv: map[string]string{
				gpushare.EnvVisibleDevices: uuid(0) + "," + uuid(1), envCUDAVisibleDevices: uuid(0) + "," + uuid(1), gpushare.EnvIndex: "0,1",
				gpushare.EnvContainerUnits: "8", gpushare.EnvPodUnits: "8", gpushare.EnvDevUnits: "14",
				gpushare.EnvMPSPinnedMemLimit: "0=99999M", gpushare.EnvMPSPipeDirectory: "/tmp/mine",
			},
			wantCDI:   []string{nodecards.DefaultCDIKind + "=" + uuid(0), nodecards.DefaultCDIKind + "=" + uuid(1)},
			wantFiles: []string{gpushare.SimulatedGPUDir + "/" + uuid(0), gpushare.SimulatedGPUDir + "/" + uuid(1)},
		},
		{
			name: "simulated, MPS node", ctrs: []ctr{{name: "main", units: 4}}, alloc: app(gpushare.CardUnits{0: 4}), units: 4, simulated: true, mps: true,
			wantEnv: map[string]string{
				gpushare.EnvVisibleDevices: uuid(0), envCUDAVisibleDevices: uuid(0), gpushare.EnvIndex: "0",
				gpushare.EnvContainerUnits: "4", gpushare.EnvPodUnits: "4", gpushare.EnvDevUnits: "14",
				gpushare.EnvMPSPinnedMemLimit: "0=4096M",
			},
			wantCDI:   []string{nodecards.DefaultCDIKind + "=" + uuid(0)},
			wantFiles: []string{gpushare.SimulatedGPUDir + "/" + uuid(0)},
		},
		{
			name: "real cards, no NVIDIA spec: device nodes", ctrs: []ctr{{name: "main", units: 8, cards: 2}}, alloc: app(gpushare.CardUnits{0: 4, 1: 4}), units: 8,
			wantNodes: append([]string{"/dev/nvidia0", "/dev/nvidia1"}, nodecards.ControlNodes()...),
		},
		{
			name: "real cards, NVIDIA spec by UUID: its devices first, the allocation's env last", ctrs: []ctr{{name: "main", units: 8, cards: 2}}, alloc: app(gpushare.CardUnits{0: 4, 1: 4}), units: 8,
			nvidia:  2,
			wantCDI: []string{nodecards.DefaultCDIKind + "=" + uuid(0), nodecards.DefaultCDIKind + "=" + uuid(1)},
			wantEnv: map[string]string{
				gpushare.EnvVisibleDevices: uuid(0) + "," + uuid(1), envCUDAVisibleDevices: uuid(0) + "," + uuid(1), gpushare.EnvIndex: "0,1",
				gpushare.EnvContainerUnits: "8", gpushare.EnvPodUnits: "8", gpushare.EnvDevUnits: "14",
				gpushare.EnvMPSPinnedMemLimit: "0=99999M", gpushare.EnvMPSPipeDirectory: "/tmp/mine",
			},
			wantFiles: []string{"/usr/lib/x86_64-linux-gnu/libcuda.so.1"},
		},
		{
			name: "real cards, NVIDIA spec without the second card: its node in the allocation's spec", ctrs: []ctr{{name: "main", units: 8, cards: 2}}, alloc: app(gpushare.CardUnits{0: 4, 1: 4}), units: 8,
			nvidia:    1,
			wantCDI:   []string{nodecards.DefaultCDIKind + "=" + uuid(0)},
			wantNodes: append([]string{"/dev/nvidia1"}, nodecards.ControlNodes()...),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := makePod("p", 1, 10, tc.ctrs, tc.alloc)
			e := newTestEnv(t, "t4:2", pod)
			dir := e.withAllocationSpecs(t, tc.simulated)
			if tc.nvidia > 0 {
				writeNVIDIASpec(t, dir, tc.nvidia)
			}
			var mpsRoot string
			if tc.mps {
				e.setIsolation(t, string(gpushare.IsolationMPS))
				mpsRoot = e.withMPSRoot(t, 0)
			}
			resp, err := e.allocateResp(t, tc.units)
			if err != nil {
				t.Fatal(err)
			}
			device := nodecards.AllocationCDIKind + "=" + string(pod.UID) + "_main"
			var got []string
			for _, d := range resp.CdiDevices {
				got = append(got, d.Name)
			}
			if d := cmp.Diff(append(slices.Clone(tc.wantCDI), device), got); d != "" {
				t.Errorf("CDI devices (-want,+got):\n%s", d)
			}
			if len(resp.Envs) != 0 {
				t.Errorf("response sets variables %v; the spec carries them", resp.Envs)
			}
			if tc.mps && (len(resp.Mounts) == 0 || !strings.HasPrefix(resp.Mounts[0].HostPath, mpsRoot)) {
				t.Errorf("MPS node: mounts %v, want the daemon's folders", resp.Mounts)
			}
			path := nodecards.AllocationSpecPath(dir, string(pod.UID)+"_main")
			spec, err := cdiapi.ReadSpec(path, 0)
			if err != nil {
				t.Fatalf("the CDI library refuses the written spec: %v", err)
			}
			if spec.Kind != nodecards.AllocationCDIKind || len(spec.Devices) != 1 {
				t.Fatalf("spec kind %q with %d devices, want %s with one", spec.Kind, len(spec.Devices), nodecards.AllocationCDIKind)
			}
			if m, _ := filepath.Glob(filepath.Join(dir, ".*.tmp")); len(m) > 0 {
				t.Errorf("temporary files left: %v", m)
			}
			var nodes []string
			for _, n := range spec.Devices[0].ContainerEdits.DeviceNodes {
				nodes = append(nodes, n.Path)
			}
			// The control nodes are listed only where they exist (not on a test machine
			// without a GPU driver).
			if d := cmp.Diff(tc.wantNodes, nodes); d != "" {
				t.Errorf("the allocation spec's device nodes (-want,+got):\n%s", d)
			}
			if tc.wantEnv == nil {
				return // real device nodes: the CDI library cannot inject them without a GPU
			}
			env, oci := containerEnvAfterCDI(t, dir, got...)
			delete(env, "PATH")
			if tc.mps { // the card's daemon folders, under the test's MPS root
				tc.wantEnv[gpushare.EnvMPSPipeDirectory] = mpsDir(mpsRoot, 0, 4096) + "/pipe"
			}
			if d := cmp.Diff(tc.wantEnv, env); d != "" {
				t.Errorf("container env after the tenant's (-want,+got):\n%s", d)
			}
			var files []string
			for _, m := range oci.Mounts {
				files = append(files, m.Destination)
			}
			if d := cmp.Diff(tc.wantFiles, files); d != "" {
				t.Errorf("mounted card files (-want,+got):\n%s", d)
			}
		})
	}
}

// TestAllocationSpecRemovedWithThePod: the spec stays while the pod may hold memory (a
// container of it may restart and needs it again; a terminating pod included) and goes
// once the pod is finished or deleted.
func TestAllocationSpecRemovedWithThePod(t *testing.T) {
	tests := []struct {
		name   string
		change func(ctx context.Context, e *testEnv, pod *corev1.Pod) error
	}{
		{"deleted", func(ctx context.Context, e *testEnv, pod *corev1.Pod) error {
			return e.client.CoreV1().Pods("default").Delete(ctx, pod.Name, metav1.DeleteOptions{})
		}},
		{"succeeded", func(ctx context.Context, e *testEnv, pod *corev1.Pod) error {
			pod.Status.Phase = corev1.PodSucceeded
			_, err := e.client.CoreV1().Pods("default").Update(ctx, pod, metav1.UpdateOptions{})
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t, "t4", makePod("p", 1, 10, []ctr{{name: "main", units: 4}}, app(gpushare.CardUnits{0: 4})))
			dir := e.withAllocationSpecs(t, true)
			if _, err := e.allocateResp(t, 4); err != nil {
				t.Fatal(err)
			}
			path := nodecards.AllocationSpecPath(dir, "uid-p_main")
			ctx := context.Background()
			pod, err := e.client.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// Terminating first: the spec must survive the grace period.
			now := metav1.NewTime(epoch.Add(time.Minute))
			pod.DeletionTimestamp = &now
			if pod, err = e.client.CoreV1().Pods("default").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			waitInformerShows(t, e, "p", func(p *corev1.Pod) bool { return p.DeletionTimestamp != nil })
			e.plugin.ledger.sync(e.plugin.podsOnNode()) // what the next Allocate does
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("terminating pod: spec %s: %v, want it kept", path, err)
			}
			if err := tc.change(ctx, e, pod); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 200; i++ {
				if _, err := os.Stat(path); os.IsNotExist(err) {
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
			t.Errorf("spec %s still there after the pod was %s", path, tc.name)
		})
	}
}

// TestRemoveStaleAllocationSpecs: at start, the specs of pods that are gone or finished
// are removed, with the limit records gpushare-limit-hook wrote for their containers on
// simulated cards; those of pods that may still hold memory, and files not of this kind,
// stay.
func TestRemoveStaleAllocationSpecs(t *testing.T) {
	e := newTestEnv(t, "t4")
	dir := e.withAllocationSpecs(t, true)
	records := map[string]bool{ // pod UID → its record kept
		"uid-running": true, "uid-terminating": true, "uid-failed": false, "uid-gone": false,
	}
	for uid := range records {
		cg := limithook.Cgroup{Path: "/kubepods/burstable/pod" + uid + "/ctr", Version: 2}
		if err := (limithook.SimulatedSetter{CardDir: e.plugin.cfg.SimulatedCardDir}).SetLimit(context.Background(), "ctr", cg, limithook.Limit{UUID: uuid(0), MiB: 4096}); err != nil {
			t.Fatal(err)
		}
	}
	running := makePod("running", 1, 10, []ctr{{name: "main", units: 4}}, app(gpushare.CardUnits{0: 4}))
	terminating := makePod("terminating", 2, 10, []ctr{{name: "main", units: 4}}, app(gpushare.CardUnits{0: 4}))
	now := metav1.NewTime(epoch)
	terminating.DeletionTimestamp = &now
	failed := makePod("failed", 3, 10, []ctr{{name: "main", units: 4}}, app(gpushare.CardUnits{0: 4}))
	failed.Status.Phase = corev1.PodFailed
	files := map[string]bool{ // file → kept
		nodecards.AllocationSpecPath(dir, "uid-running_main"):     true,
		nodecards.AllocationSpecPath(dir, "uid-running_sidecar"):  true,
		nodecards.AllocationSpecPath(dir, "uid-terminating_main"): true,
		nodecards.AllocationSpecPath(dir, "uid-failed_main"):      false,
		nodecards.AllocationSpecPath(dir, "uid-gone_main"):        false,
		filepath.Join(dir, "nvidia.com-gpu.json"):                 true,
		filepath.Join(dir, "gpushare-simulated.json"):             true,
	}
	for f := range files {
		if err := os.WriteFile(f, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.plugin.removeStaleAllocationSpecs([]*corev1.Pod{running, terminating, failed}); n != 2 {
		t.Errorf("removed %d files, want 2", n)
	}
	for f, kept := range files {
		if _, err := os.Stat(f); (err == nil) != kept {
			t.Errorf("%s: exists %v, want %v", filepath.Base(f), err == nil, kept)
		}
	}
	recs, err := limithook.ReadRecords(e.plugin.cfg.SimulatedCardDir, uuid(0))
	if err != nil {
		t.Fatal(err)
	}
	left := map[string]bool{}
	for _, r := range recs {
		left[r.Cgroup] = true
	}
	for uid, kept := range records {
		if got := left["/kubepods/burstable/pod"+uid+"/ctr"]; got != kept {
			t.Errorf("limit record of %s: kept %v, want %v", uid, got, kept)
		}
	}
}

func TestConfigChecksCDIAllocation(t *testing.T) {
	for _, tc := range []struct {
		specDir, cardDir string
		wantErr          bool
	}{
		{"", "", false},
		{"/var/run/cdi", "/var/run/cdi/gpushare-simulated", false},
		{"run/cdi", "", true},
		{"/var/run/cdi/../x", "", true},
		{"/var/run/cdi", "cards", true},
	} {
		cfg := Config{DeviceListStrategy: DeviceListCDIAllocation, CDISpecDir: tc.specDir, SimulatedCardDir: tc.cardDir}
		err := checkCDIConfig(&cfg)
		if (err != nil) != tc.wantErr {
			t.Errorf("spec dir %q, card dir %q: error %v, want error %v", tc.specDir, tc.cardDir, err, tc.wantErr)
		}
		if err == nil && cfg.CDISpecDir == "" {
			t.Errorf("spec dir not defaulted")
		}
	}
	if d, err := ParseDeviceListStrategy("cdi-allocation"); err != nil || d != DeviceListCDIAllocation {
		t.Errorf("ParseDeviceListStrategy(cdi-allocation) = %q, %v", d, err)
	}
}

package deviceplugin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/mps"
)

// setIsolation sets testNode's isolation label on the fake API server ("" removes it).
func (e *testEnv) setIsolation(t *testing.T, mode string) {
	t.Helper()
	ctx := context.Background()
	node, err := e.client.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	if mode == "" {
		delete(node.Labels, gpushare.LabelIsolation)
	} else {
		node.Labels[gpushare.LabelIsolation] = mode
	}
	if _, err := e.client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// withMPSRoot points the plugin at a fresh MPS root and stands in for gpushare-mps there: the
// daemons wanted on the listed cards are reported ready (with the wanted cap) until the test
// ends; those on other cards never are, and Allocate waits 300 ms for them.
func (e *testEnv) withMPSRoot(t *testing.T, readyCards ...int) string {
	t.Helper()
	root := t.TempDir()
	e.plugin.cfg.MPSRoot = root
	e.plugin.cfg.MPSReadyTimeout = 300 * time.Millisecond
	ready := map[string]bool{}
	for _, c := range readyCards {
		ready[uuid(c)] = true
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			entries, _, _ := mps.Scan(root)
			for _, en := range entries {
				if en.Want != nil && en.Ready == nil && ready[en.Folder.Card] {
					b, _ := json.Marshal(mps.Ready{Pid: 1, Cap: en.Want.Cap})
					_ = os.WriteFile(filepath.Join(en.Folder.Dir, mps.ReadyFile), b, 0o644)
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return root
}

// mpsDir is the folder of the daemon holding clients to mib MiB on card i under root.
func mpsDir(root string, i int, mib int64) string {
	return filepath.Join(root, uuid(i), mps.Cap{PinnedMemMiB: mib, ActiveThreadPct: 100}.Name())
}

// allocateResp is allocate returning the whole container response.
func (e *testEnv) allocateResp(t *testing.T, n int) (*pluginapi.ContainerAllocateResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := e.plugin.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: fakeIDs(n)}}})
	if err != nil {
		return nil, err
	}
	return resp.ContainerResponses[0], nil
}

// mpsOf is the part of a response MPS isolation adds: its three variables and the mounts.
func mpsOf(r *pluginapi.ContainerAllocateResponse) (map[string]string, []*pluginapi.Mount) {
	env := map[string]string{}
	for _, k := range []string{gpushare.EnvMPSPinnedMemLimit, gpushare.EnvMPSPipeDirectory, gpushare.EnvMPSLogDirectory} {
		if v, ok := r.Envs[k]; ok {
			env[k] = v
		}
	}
	return env, r.Mounts
}

// TestAllocateIsolation: on a node labelled mps a container gets its grant on its card as
// the pinned memory limit of device 0 (units × unit size, in MiB) and the card's daemon
// folders, mounted from the host; a node labelled none, or not labelled, gets none of that.
func TestAllocateIsolation(t *testing.T) {
	tests := []struct {
		name  string
		unit  gpushare.Unit
		mode  string
		units int
		pod   runtime.Object
		// wantLimit is the pinned limit ("" = no MPS part at all), wantMiB the daemon's cap.
		wantLimit string
		wantMiB   int64
	}{
		// 4 GiB on node card 1, which the container sees as device 0: 4 × 1024 MiB.
		{"mps, GiB units, card 1", gpushare.GiB, "mps", 4,
			makePod("p", 1, 10, []ctr{{name: "main", units: 4}}, app(gpushare.CardUnits{1: 4})), "0=4096M", 4096},
		// 1536 MiB units: 1536 × 1 MiB.
		{"mps, MiB units, card 0", gpushare.Unit{MiB: 1}, "mps", 1536,
			makePod("p", 1, 10, []ctr{{name: "main", units: 1536}}, app(gpushare.CardUnits{0: 1536})), "0=1536M", 1536},
		// 3 units of 256 MiB: 768 MiB.
		{"mps, 256MiB units", gpushare.Unit{MiB: 256}, "mps", 3,
			makePod("p", 1, 10, []ctr{{name: "main", units: 3}}, app(gpushare.CardUnits{1: 3})), "0=768M", 768},
		{"none", gpushare.GiB, "none", 4, makePod("p", 1, 10, []ctr{{name: "main", units: 4}}, app(gpushare.CardUnits{1: 4})), "", 0},
		{"unlabelled", gpushare.GiB, "", 4, makePod("p", 1, 10, []ctr{{name: "main", units: 4}}, app(gpushare.CardUnits{1: 4})), "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnvUnit(t, "t4:2", tc.unit, tc.pod)
			root := e.withMPSRoot(t, 0, 1)
			e.setIsolation(t, tc.mode)
			r, err := e.allocateResp(t, tc.units)
			if err != nil {
				t.Fatal(err)
			}
			env, mounts := mpsOf(r)
			var wantEnv map[string]string
			var wantMounts []*pluginapi.Mount
			if tc.wantLimit != "" {
				card := 0
				if r.Envs[gpushare.EnvIndex] == "1" {
					card = 1
				}
				dir := mpsDir(root, card, tc.wantMiB)
				wantEnv = map[string]string{
					gpushare.EnvMPSPinnedMemLimit: tc.wantLimit,
					gpushare.EnvMPSPipeDirectory:  dir + "/pipe",
				}
				wantMounts = []*pluginapi.Mount{
					{ContainerPath: dir + "/pipe", HostPath: dir + "/pipe", ReadOnly: true},
					{ContainerPath: "/dev/shm", HostPath: dir + "/shm"},
				}
			} else {
				wantEnv = map[string]string{}
			}
			if d := cmp.Diff(wantEnv, env); d != "" {
				t.Errorf("MPS variables (-want,+got):\n%s", d)
			}
			if d := cmp.Diff(wantMounts, mounts, cmp.Comparer(func(a, b *pluginapi.Mount) bool {
				return a.ContainerPath == b.ContainerPath && a.HostPath == b.HostPath && a.ReadOnly == b.ReadOnly
			})); d != "" {
				t.Errorf("mounts (-want,+got):\n%s", d)
			}
			// The gpu-mem contract is the same in every mode.
			if r.Envs[gpushare.EnvContainerUnits] != strconv.Itoa(tc.units) || r.Envs[gpushare.EnvVisibleDevices] == "" {
				t.Errorf("gpu-mem variables %v", r.Envs)
			}
		})
	}
}

// TestAllocateIsolationRefusals: a container on two cards of an MPS node, any container on a
// node whose isolation label is invalid, and a container whose card's MPS daemon is not
// ready are refused, with a Warning event on the pod saying why, and the pod is not marked
// served.
func TestAllocateIsolationRefusals(t *testing.T) {
	tests := []struct {
		name      string
		mode      string
		pod       runtime.Object
		units     int
		ready     []int
		wantEvent string
	}{
		{"mps, container on two cards", "mps",
			makePod("p", 1, 10, []ctr{{name: "big", units: 8, cards: 2}}, app(gpushare.CardUnits{0: 4, 1: 4})), 8, []int{0, 1},
			`node isolates cards with MPS (gpushare.io/isolation=mps): one card per container, and container "big" asks for 2`},
		{"invalid label", "Mps",
			makePod("p", 1, 10, []ctr{{name: "main", units: 4}}, app(gpushare.CardUnits{0: 4})), 4, []int{0, 1},
			`node label gpushare.io/isolation="Mps": want none, mps or limit`},
		{"daemon not ready", "mps",
			makePod("p", 1, 10, []ctr{{name: "main", units: 4}}, app(gpushare.CardUnits{1: 4})), 4, []int{0},
			"no MPS daemon ready for its grant on card 1 (" + uuid(1) + ")"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t, "t4:2", tc.pod)
			e.withMPSRoot(t, tc.ready...)
			e.setIsolation(t, tc.mode)
			r, err := e.allocateResp(t, tc.units)
			if status.Code(err) != codes.FailedPrecondition || r != nil {
				t.Fatalf("Allocate = %v, %v; want FailedPrecondition", r, err)
			}
			if !strings.Contains(err.Error(), tc.wantEvent) {
				t.Errorf("error %q does not say %q", err, tc.wantEvent)
			}
			events := e.drainEvents()
			if len(events) != 1 || !strings.HasPrefix(events[0], "Warning "+eventAllocateRefused+" ") || !strings.Contains(events[0], tc.wantEvent) {
				t.Errorf("events %q, want one Warning %s saying %q", events, eventAllocateRefused, tc.wantEvent)
			}
			if a := e.podAnnotations(t, "p")[gpushare.AnnotationAllocated]; a != "" {
				t.Errorf("refused pod marked served: %q", a)
			}
		})
	}
}

// TestAllocateIsolationFollowsTheLabel: relabelling the node applies to the next Allocate,
// without a restart, both ways.
func TestAllocateIsolationFollowsTheLabel(t *testing.T) {
	one := []ctr{{name: "main", units: 2}}
	e := newTestEnv(t, "t4:2",
		makePod("a", 1, 10, one, app(gpushare.CardUnits{0: 2})),
		makePod("b", 2, 11, one, app(gpushare.CardUnits{0: 2})),
		makePod("c", 3, 12, one, app(gpushare.CardUnits{0: 2})))
	e.withMPSRoot(t, 0)
	var got []string
	for _, mode := range []string{"", "mps", "none"} {
		e.setIsolation(t, mode)
		r, err := e.allocateResp(t, 2)
		if err != nil {
			t.Fatalf("isolation %q: %v", mode, err)
		}
		got = append(got, r.Envs[gpushare.EnvMPSPinnedMemLimit])
	}
	if d := cmp.Diff([]string{"", "0=2048M", ""}, got); d != "" {
		t.Errorf("pinned limits of a, b, c (-want,+got):\n%s", d)
	}
}

// TestAllocateNodeUnreadable: without the node, Allocate cannot know the mode and refuses
// (Unavailable: kubelet fails the pod, which is retried).
func TestAllocateNodeUnreadable(t *testing.T) {
	e := newTestEnv(t, "t4", makePod("p", 1, 10, []ctr{{name: "main", units: 2}}, app(gpushare.CardUnits{0: 2})))
	if err := e.client.CoreV1().Nodes().Delete(context.Background(), testNode, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.allocateResp(t, 2); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), gpushare.LabelIsolation) {
		t.Errorf("Allocate = %v, want Unavailable naming %s", err, gpushare.LabelIsolation)
	}
}

// TestMPSMountsReadOnly: whatever the handover strategy, a container on an MPS node gets its
// daemon's pipe folder read-only (every container of the card shares them; one that
// could write there could remove or replace the daemon's pipes and sockets under its
// neighbours) and only the card's shm folder, its /dev/shm, writable.
func TestMPSMountsReadOnly(t *testing.T) {
	for _, strategy := range []DeviceListStrategy{DeviceListEnvVar, DeviceListCDICRI, DeviceListCDIAllocation} {
		t.Run(string(strategy), func(t *testing.T) {
			e := newTestEnv(t, "t4:2", makePod("p", 1, 10, []ctr{{name: "main", units: 4}}, app(gpushare.CardUnits{0: 4})))
			root := e.withMPSRoot(t, 0, 1)
			if strategy == DeviceListCDIAllocation {
				e.withAllocationSpecs(t, true)
			} else {
				e.plugin.cfg.DeviceListStrategy = strategy
			}
			e.setIsolation(t, "mps")
			r, err := e.allocateResp(t, 4)
			if err != nil {
				t.Fatal(err)
			}
			dir := mpsDir(root, 0, 4096)
			got := map[string]bool{} // host path: writable
			for _, m := range r.Mounts {
				got[m.HostPath] = !m.ReadOnly
				if m.ContainerPath != m.HostPath && m.ContainerPath != "/dev/shm" {
					t.Errorf("mount %s at %s: want the host path (the daemon and its clients name the same paths)", m.HostPath, m.ContainerPath)
				}
			}
			want := map[string]bool{dir + "/pipe": false, dir + "/shm": true}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("mounts, host path: writable (-want,+got):\n%s", d)
			}
		})
	}
}

package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/limithook"
	"github.com/gpushare/gpushare/pkg/nodecards"
	"github.com/gpushare/gpushare/pkg/noderuntime"
)

const testHookPath = "/opt/gpushare/bin/gpushare-limit-hook"

// TestAllocateLimitNode: on a node labelled limit, the per-allocation spec names the limit
// hook as a createRuntime hook with each card's UUID and grant in MiB, the pod's UID and the
// pod's usage of each of its cards (gpushare.PodAllocation.CardUsage) in MiB; the spec
// validates with the CDI library's reader, and once injected after a tenant's env (which sets
// its own MPS limit) the hook it hands the runtime, run on the container's state, records
// exactly the grant for the container's cgroup and the pod's usage for the pod's. Without the
// label there is no hook.
func TestAllocateLimitNode(t *testing.T) {
	tests := []struct {
		name      string
		label     string
		ctrs      []ctr
		alloc     gpushare.PodAllocation
		units     int
		unit      gpushare.Unit
		simulated bool
		wantArgs  []string      // nil: no hook
		wantPod   map[int]int64 // the pod's limit on each card index, in MiB
	}{
		{
			name: "simulated, one card", label: "limit", ctrs: []ctr{{name: "main", units: 6}}, alloc: app(gpushare.CardUnits{1: 6}), units: 6, unit: gpushare.GiB, simulated: true,
			wantArgs: []string{testHookPath, "--mode=simulated", "--simulated-card-dir=<cards>", "--deadline=20s", "--pod-uid=uid-p", "--pod-limit=" + uuid(1) + "=6144", uuid(1) + "=6144"},
			wantPod:  map[int]int64{1: 6144},
		},
		{
			name: "simulated, two cards, 256 MiB units", label: "limit", ctrs: []ctr{{name: "main", units: 8, cards: 2}}, alloc: app(gpushare.CardUnits{0: 4, 1: 4}), units: 8,
			unit: gpushare.Unit{MiB: 256}, simulated: true,
			wantArgs: []string{testHookPath, "--mode=simulated", "--simulated-card-dir=<cards>", "--deadline=20s", "--pod-uid=uid-p",
				"--pod-limit=" + uuid(0) + "=1024", "--pod-limit=" + uuid(1) + "=1024", uuid(0) + "=1024", uuid(1) + "=1024"},
			wantPod: map[int]int64{0: 1024, 1: 1024},
		},
		{
			name: "real cards: NVML", label: "limit", ctrs: []ctr{{name: "main", units: 4}}, alloc: app(gpushare.CardUnits{0: 4}), units: 4, unit: gpushare.GiB,
			wantArgs: []string{testHookPath, "--mode=nvml", "--deadline=20s", "--pod-uid=uid-p", "--pod-limit=" + uuid(0) + "=4096", uuid(0) + "=4096"},
		},
		{
			name: "two containers on one card: the pod's limit is their sum", label: "limit", ctrs: []ctr{{name: "main", units: 4}, {name: "side", units: 2}},
			alloc: app(gpushare.CardUnits{0: 4}, gpushare.CardUnits{0: 2}), units: 4, unit: gpushare.GiB, simulated: true,
			wantArgs: []string{testHookPath, "--mode=simulated", "--simulated-card-dir=<cards>", "--deadline=20s", "--pod-uid=uid-p", "--pod-limit=" + uuid(0) + "=6144", uuid(0) + "=4096"},
			wantPod:  map[int]int64{0: 6144},
		},
		{
			name: "two containers on two cards: the pod's limit on each", label: "limit", ctrs: []ctr{{name: "main", units: 4}, {name: "side", units: 2}},
			alloc: app(gpushare.CardUnits{0: 4}, gpushare.CardUnits{1: 2}), units: 4, unit: gpushare.GiB, simulated: true,
			wantArgs: []string{testHookPath, "--mode=simulated", "--simulated-card-dir=<cards>", "--deadline=20s", "--pod-uid=uid-p",
				"--pod-limit=" + uuid(0) + "=4096", "--pod-limit=" + uuid(1) + "=2048", uuid(0) + "=4096"},
			wantPod: map[int]int64{0: 4096, 1: 2048},
		},
		{
			name: "an init container before an app container on one card: the pod's usage, not the sum", label: "limit",
			ctrs:  []ctr{{name: "main", units: 4}, {name: "init", units: 6, init: true}},
			alloc: gpushare.PodAllocation{App: gpushare.Allocation{0: {0: 4}}, Init: gpushare.Allocation{0: {0: 6}}}, units: 6, unit: gpushare.GiB, simulated: true,
			wantArgs: []string{testHookPath, "--mode=simulated", "--simulated-card-dir=<cards>", "--deadline=20s", "--pod-uid=uid-p", "--pod-limit=" + uuid(0) + "=6144", uuid(0) + "=6144"},
			wantPod:  map[int]int64{0: 6144},
		},
		{
			name: "no label: no hook", ctrs: []ctr{{name: "main", units: 4}}, alloc: app(gpushare.CardUnits{0: 4}), units: 4, unit: gpushare.GiB, simulated: true,
		},
		{
			name: "mps: no hook", label: "mps", ctrs: []ctr{{name: "main", units: 4}}, alloc: app(gpushare.CardUnits{0: 4}), units: 4, unit: gpushare.GiB, simulated: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := makePod("p", 1, 10, tc.ctrs, tc.alloc)
			e := newTestEnvUnit(t, "t4:2", tc.unit, pod)
			dir := e.withAllocationSpecs(t, tc.simulated)
			e.plugin.cfg.LimitHookPath = testHookPath
			e.setIsolation(t, tc.label)
			if tc.label == "mps" {
				e.withMPSRoot(t, 0, 1)
			}
			if _, err := e.allocateResp(t, tc.units); err != nil {
				t.Fatal(err)
			}
			served := tc.ctrs[0]
			for _, c := range tc.ctrs {
				if c.init { // kubelet starts init containers first
					served = c
				}
			}
			name := string(pod.UID) + "_" + served.name
			spec, err := cdiapi.ReadSpec(nodecards.AllocationSpecPath(dir, name), 0)
			if err != nil {
				t.Fatalf("the CDI library refuses the written spec: %v", err)
			}
			hooks := spec.Devices[0].ContainerEdits.Hooks
			if tc.wantArgs == nil {
				if len(hooks) != 0 {
					t.Errorf("hooks %+v, want none", hooks)
				}
				return
			}
			for i, a := range tc.wantArgs {
				tc.wantArgs[i] = strings.ReplaceAll(a, "<cards>", nodecards.SimulatedCardDir(dir))
			}
			if len(hooks) != 1 || hooks[0].HookName != cdiapi.CreateRuntimeHook || hooks[0].Path != testHookPath {
				t.Fatalf("hooks %+v, want one %s hook at %s", hooks, cdiapi.CreateRuntimeHook, testHookPath)
			}
			if d := cmp.Diff(tc.wantArgs, hooks[0].Args); d != "" {
				t.Errorf("hook args (-want,+got):\n%s", d)
			}
			if !tc.simulated {
				return
			}
			_, oci := containerEnvAfterCDI(t, dir, nodecards.AllocationCDIKind+"="+name)
			if oci.Hooks == nil || len(oci.Hooks.CreateRuntime) != 1 {
				t.Fatalf("OCI hooks after injection: %+v, want one createRuntime hook", oci.Hooks)
			}
			ctrRecords, podRecords := runSimulatedHook(t, oci.Hooks.CreateRuntime[0].Args, pod.UID)
			ref := gpushare.ContainerRef{InitList: served.init}
			for i, c := range spec.Devices[0].ContainerEdits.Mounts {
				uuid := filepath.Base(c.HostPath)
				want := uint64(tc.alloc.For(ref)[cardIndex(t, e, uuid)]) * uint64(tc.unit.MiB) << 20
				if got := ctrRecords[uuid]; got != want {
					t.Errorf("card %d (%s): recorded limit %d bytes, want the grant %d", i, uuid, got, want)
				}
			}
			wantPod := map[string]uint64{}
			for idx, mib := range tc.wantPod {
				wantPod[uuid(idx)] = uint64(mib) << 20
			}
			if d := cmp.Diff(wantPod, podRecords); d != "" {
				t.Errorf("the pod's recorded limits, bytes by card (-want +got):\n%s", d)
			}
		})
	}
}

// runSimulatedHook runs the hook with args (argv[0] first) on a container of the pod with uid
// in a fake /proc, as the runtime would, and returns the recorded limits by card UUID, of the
// container's cgroup and of the pod's.
func runSimulatedHook(t *testing.T, args []string, uid types.UID) (ctrLimits, podLimits map[string]uint64) {
	t.Helper()
	a, err := limithook.ParseArgs(args[1:])
	if err != nil {
		t.Fatal(err)
	}
	a.ProcRoot = t.TempDir()
	podCg := "/kubepods/besteffort/pod" + string(uid)
	cg := podCg + "/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	if err := os.MkdirAll(filepath.Join(a.ProcRoot, "42"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a.ProcRoot, "42", "cgroup"), []byte("0::"+cg+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	state := strings.NewReader(`{"ociVersion":"1.2.0","id":"c1","status":"creating","pid":42,"bundle":"/b"}`)
	if err := limithook.Run(context.Background(), a, state, limithook.SimulatedSetter{CardDir: a.SimulatedCardDir}); err != nil {
		t.Fatalf("the hook failed: %v", err)
	}
	ctrLimits, podLimits = map[string]uint64{}, map[string]uint64{}
	for _, l := range append(a.PodLimits, a.Limits...) {
		rs, err := limithook.ReadRecords(a.SimulatedCardDir, l.UUID)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			switch {
			case r.Pod && r.Cgroup == podCg:
				podLimits[l.UUID] = r.HardLimitBytes
			case !r.Pod && r.Cgroup == cg:
				ctrLimits[l.UUID] = r.HardLimitBytes
			default:
				t.Fatalf("record %+v of %s, want one for %s or its pod's %s", r, l.UUID, cg, podCg)
			}
		}
	}
	return ctrLimits, podLimits
}

func cardIndex(t *testing.T, e *testEnv, uuid string) int {
	t.Helper()
	for _, c := range e.plugin.Cards() {
		if c.UUID == uuid {
			return c.Index
		}
	}
	t.Fatalf("no card %s", uuid)
	return -1
}

// runtimeAccepts stands for preflight.IsolationBlocker on a node whose NVIDIA runtime
// honours an unprivileged pod's own NVIDIA_VISIBLE_DEVICES.
func runtimeAccepts() error {
	return errors.New("gpushare.io/env-device-requests=accepted: set accept-nvidia-visible-devices-envvar-when-unprivileged = false")
}

// TestAllocateLimitUnavailable: a node labelled limit (or mps) that cannot enforce it
// refuses the container, saying why, rather than running it unlimited.
func TestAllocateLimitUnavailable(t *testing.T) {
	tests := []struct {
		name        string
		label       gpushare.Isolation
		strategy    DeviceListStrategy
		unsupported error
		blocker     func() error
		want        string
	}{
		{name: "envvar strategy", strategy: DeviceListEnvVar, want: "--device-list-strategy=envvar, not cdi-allocation"},
		{name: "driver without per-cgroup limits", strategy: DeviceListCDIAllocation, unsupported: errors.New("NVIDIA driver R615 or later"), want: "R615"},
		{name: "runtime honours a pod's own device requests", strategy: DeviceListCDIAllocation, blocker: runtimeAccepts,
			want: "accept-nvidia-visible-devices-envvar-when-unprivileged = false"},
		{name: "mps where the runtime honours a pod's own device requests", label: gpushare.IsolationMPS, strategy: DeviceListEnvVar, blocker: runtimeAccepts,
			want: "accept-nvidia-visible-devices-envvar-when-unprivileged = false"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnvNode(t, "t4:2", func(c *noderuntime.Config) { c.LimitUnsupported, c.IsolationBlocker = tc.unsupported, tc.blocker },
				makePod("p", 1, 10, []ctr{{name: "main", units: 4}}, app(gpushare.CardUnits{0: 4})))
			if tc.strategy == DeviceListCDIAllocation {
				e.withAllocationSpecs(t, true)
			}
			if tc.label == "" {
				tc.label = gpushare.IsolationLimit
			}
			if tc.label == gpushare.IsolationMPS {
				e.withMPSRoot(t, 0, 1)
			}
			e.setIsolation(t, string(tc.label))
			r, err := e.allocateResp(t, 4)
			if status.Code(err) != codes.FailedPrecondition || r != nil {
				t.Fatalf("Allocate = %v, %v; want FailedPrecondition", r, err)
			}
			for _, w := range []string{"gpushare.io/isolation=" + string(tc.label) + " but cannot enforce it", tc.want} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if ev := e.drainEvents(); len(ev) != 1 || !strings.Contains(ev[0], tc.want) {
				t.Errorf("events %q, want one saying %q", ev, tc.want)
			}
		})
	}
}

// TestPublishEnforcedIsolation: the node's isolation-enforced label says what the node
// really enforces, with a Warning event when that is less than its isolation label asks.
func TestPublishEnforcedIsolation(t *testing.T) {
	tests := []struct {
		name        string
		label       string
		strategy    DeviceListStrategy
		unsupported error
		blocker     func() error
		want        string // "": no label
		wantEvent   bool
	}{
		{name: "no isolation label", strategy: DeviceListCDIAllocation},
		{name: "invalid isolation label", label: "Limit", strategy: DeviceListCDIAllocation},
		{name: "mps", label: "mps", strategy: DeviceListEnvVar, want: "mps"},
		{name: "limit, enforced", label: "limit", strategy: DeviceListCDIAllocation, want: "limit"},
		{name: "limit, unsupported driver", label: "limit", strategy: DeviceListCDIAllocation, unsupported: errors.New("no dmem"), want: "none", wantEvent: true},
		{name: "limit, envvar strategy", label: "limit", strategy: DeviceListEnvVar, want: "none", wantEvent: true},
		{name: "limit, runtime honours a pod's own device requests", label: "limit", strategy: DeviceListCDIAllocation, blocker: runtimeAccepts, want: "none", wantEvent: true},
		{name: "mps, runtime honours a pod's own device requests", label: "mps", strategy: DeviceListEnvVar, blocker: runtimeAccepts, want: "none", wantEvent: true},
		{name: "none, runtime honours a pod's own device requests", label: "none", strategy: DeviceListEnvVar, blocker: runtimeAccepts, want: "none"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnvNode(t, "t4", func(c *noderuntime.Config) { c.LimitUnsupported, c.IsolationBlocker = tc.unsupported, tc.blocker })
			e.plugin.cfg.DeviceListStrategy = tc.strategy
			e.setIsolation(t, tc.label)
			ctx := context.Background()
			for i := 0; i < 2; i++ { // the second publish changes nothing and says nothing
				if err := e.plugin.publishNode(ctx); err != nil {
					t.Fatal(err)
				}
			}
			node, err := e.client.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, ok := node.Labels[gpushare.LabelIsolationEnforced]
			if got != tc.want || ok != (tc.want != "") {
				t.Errorf("%s = %q (set %v), want %q", gpushare.LabelIsolationEnforced, got, ok, tc.want)
			}
			events := e.drainEvents()
			if n := len(events); n != map[bool]int{false: 0, true: 1}[tc.wantEvent] {
				t.Errorf("events %q, want %d", events, map[bool]int{false: 0, true: 1}[tc.wantEvent])
			}
			if tc.wantEvent && len(events) > 0 && !strings.HasPrefix(events[0], fmt.Sprintf("Warning %s ", nodecards.EventIsolationUnavailable)) {
				t.Errorf("event %q, want a Warning %s", events[0], nodecards.EventIsolationUnavailable)
			}
		})
	}
}

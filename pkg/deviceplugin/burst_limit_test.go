package deviceplugin

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/limithook"
	"github.com/gpushare/gpushare/pkg/nodecards"
)

// TestAllocateMemLimit: on a node labelled limit, a container whose pod gives it a memory
// limit above its request (gpushare.AnnotationMemLimit) gets the request as soft limit and
// the limit as hard limit on each card, in the per-allocation spec's hook arguments, and its
// pod the sums of its containers' requests and limits; the simulated hook records both.
func TestAllocateMemLimit(t *testing.T) {
	tests := []struct {
		name     string
		ctrs     []ctr
		alloc    gpushare.PodAllocation
		limits   string
		units    int
		wantArgs []string // after --pod-uid
		wantCtr  limithook.Record
	}{
		{
			name: "one container", ctrs: []ctr{{name: "main", units: 4}}, alloc: app(gpushare.CardUnits{1: 4}), limits: "main=10", units: 4,
			wantArgs: []string{"--pod-limit=" + uuid(1) + "=4096:10240", uuid(1) + "=4096:10240"},
			wantCtr:  limithook.Record{HardLimitBytes: 10240 << 20, SoftLimitBytes: 4096 << 20},
		},
		{
			name: "a limited container beside one without: the pod's hard limit adds the other's request", ctrs: []ctr{{name: "main", units: 4}, {name: "side", units: 2}},
			alloc: app(gpushare.CardUnits{0: 4}, gpushare.CardUnits{0: 2}), limits: "main=10", units: 4,
			wantArgs: []string{"--pod-limit=" + uuid(0) + "=6144:12288", uuid(0) + "=4096:10240"},
			wantCtr:  limithook.Record{HardLimitBytes: 10240 << 20, SoftLimitBytes: 4096 << 20},
		},
		{
			name: "two limited containers: the pod's hard limit stops at the card", ctrs: []ctr{{name: "main", units: 4}, {name: "side", units: 2}},
			alloc: app(gpushare.CardUnits{0: 4}, gpushare.CardUnits{0: 2}), limits: "main=10,side=8", units: 4,
			wantArgs: []string{"--pod-limit=" + uuid(0) + "=6144:14336", uuid(0) + "=4096:10240"},
			wantCtr:  limithook.Record{HardLimitBytes: 10240 << 20, SoftLimitBytes: 4096 << 20},
		},
		{
			name: "the other container is limited, this one not", ctrs: []ctr{{name: "main", units: 4}, {name: "side", units: 2}},
			alloc: app(gpushare.CardUnits{0: 4}, gpushare.CardUnits{0: 2}), limits: "side=6", units: 4,
			wantArgs: []string{"--pod-limit=" + uuid(0) + "=6144:10240", uuid(0) + "=4096"},
			wantCtr:  limithook.Record{HardLimitBytes: 4096 << 20},
		},
		{
			name: "two cards: the limit per card", ctrs: []ctr{{name: "main", units: 4, cards: 2}}, alloc: app(gpushare.CardUnits{0: 2, 1: 2}), limits: "main=8", units: 4,
			wantArgs: []string{"--pod-limit=" + uuid(0) + "=2048:4096", "--pod-limit=" + uuid(1) + "=2048:4096", uuid(0) + "=2048:4096", uuid(1) + "=2048:4096"},
			wantCtr:  limithook.Record{HardLimitBytes: 4096 << 20, SoftLimitBytes: 2048 << 20},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := makePod("p", 1, 10, tc.ctrs, tc.alloc)
			pod.Annotations[gpushare.AnnotationMemLimit] = tc.limits
			e := newTestEnvUnit(t, "t4:2", gpushare.GiB, pod)
			dir := e.withAllocationSpecs(t, true)
			e.plugin.cfg.LimitHookPath = testHookPath
			e.setIsolation(t, "limit")
			if _, err := e.allocateResp(t, tc.units); err != nil {
				t.Fatal(err)
			}
			name := string(pod.UID) + "_" + tc.ctrs[0].name
			spec, err := cdiapi.ReadSpec(nodecards.AllocationSpecPath(dir, name), 0)
			if err != nil {
				t.Fatalf("the CDI library refuses the written spec: %v", err)
			}
			hooks := spec.Devices[0].ContainerEdits.Hooks
			if len(hooks) != 1 {
				t.Fatalf("hooks %+v, want one", hooks)
			}
			args := hooks[0].Args
			i := len(args) - len(tc.wantArgs)
			if d := cmp.Diff(tc.wantArgs, args[max(i, 0):]); d != "" || i < 1 || !strings.HasPrefix(args[i-1], "--pod-uid=") {
				t.Errorf("hook args %q, want them to end with --pod-uid and (-want,+got):\n%s", args, d)
			}
			_, oci := containerEnvAfterCDI(t, dir, nodecards.AllocationCDIKind+"="+name)
			a, err := limithook.ParseArgs(oci.Hooks.CreateRuntime[0].Args[1:])
			if err != nil {
				t.Fatal(err)
			}
			runSimulatedHook(t, oci.Hooks.CreateRuntime[0].Args, pod.UID)
			rs, err := limithook.ReadRecords(a.SimulatedCardDir, a.Limits[0].UUID)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				if !r.Pod && (r.HardLimitBytes != tc.wantCtr.HardLimitBytes || r.SoftLimitBytes != tc.wantCtr.SoftLimitBytes) {
					t.Errorf("container record %+v, want hard %d soft %d", r, tc.wantCtr.HardLimitBytes, tc.wantCtr.SoftLimitBytes)
				}
			}
		})
	}
}

// TestAllocateMemLimitRefusals: a container with a memory limit is refused, with a Warning
// event naming the annotation, on a node that does not enforce limits and on a card smaller
// than its limit.
func TestAllocateMemLimitRefusals(t *testing.T) {
	tests := []struct {
		name, mode, limits string
		want               string
	}{
		{"none node", "none", "main=10", `container "main" has a GPU-memory limit (gpushare.io/gpu-mem-limit: 10 above its request 4), which only nodes labelled gpushare.io/isolation=limit enforce, and this node is none`},
		{"unlabelled node", "", "main=10", "this node is none"},
		{"mps node", "mps", "main=10", "this node is mps"},
		{"limit above the card", "limit", "main=20", `its GPU-memory limit (gpushare.io/gpu-mem-limit) of 20 units per card is above card 0`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := makePod("p", 1, 10, []ctr{{name: "main", units: 4}}, app(gpushare.CardUnits{0: 4}))
			pod.Annotations[gpushare.AnnotationMemLimit] = tc.limits
			e := newTestEnv(t, "t4:2", pod)
			e.withAllocationSpecs(t, true)
			e.plugin.cfg.LimitHookPath = testHookPath
			e.withMPSRoot(t, 0, 1)
			e.setIsolation(t, tc.mode)
			r, err := e.allocateResp(t, 4)
			if status.Code(err) != codes.FailedPrecondition || r != nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Allocate = %v, %v; want FailedPrecondition saying %q", r, err, tc.want)
			}
			events := e.drainEvents()
			if len(events) != 1 || !strings.HasPrefix(events[0], "Warning "+eventAllocateRefused+" ") || !strings.Contains(events[0], tc.want) {
				t.Errorf("events %q, want one Warning %s saying %q", events, eventAllocateRefused, tc.want)
			}
		})
	}
}

// TestAllocateToolkitHook: with NVIDIACDIHookPath set, a limit node's per-allocation spec
// names NVIDIA's toolkit hook, once per card, and carries the soft and hard limit per card in
// MiB under both spellings of the toolkit's variables; no gpushare-limit-hook.
func TestAllocateToolkitHook(t *testing.T) {
	tests := []struct {
		name    string
		ctrs    []ctr
		alloc   gpushare.PodAllocation
		limits  string
		units   int
		wantReq string
		wantLim string
	}{
		{name: "a limit", ctrs: []ctr{{name: "main", units: 4}}, alloc: app(gpushare.CardUnits{1: 4}), limits: "main=10", units: 4, wantReq: "4096", wantLim: "10240"},
		{name: "no limit: the grant is both", ctrs: []ctr{{name: "main", units: 4}}, alloc: app(gpushare.CardUnits{1: 4}), units: 4, wantReq: "4096", wantLim: "4096"},
		{name: "two cards: per card", ctrs: []ctr{{name: "main", units: 4, cards: 2}}, alloc: app(gpushare.CardUnits{0: 2, 1: 2}), limits: "main=8", units: 4, wantReq: "2048", wantLim: "4096"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := makePod("p", 1, 10, tc.ctrs, tc.alloc)
			if tc.limits != "" {
				pod.Annotations[gpushare.AnnotationMemLimit] = tc.limits
			}
			e := newTestEnvUnit(t, "t4:2", gpushare.GiB, pod)
			dir := e.withAllocationSpecs(t, false)
			e.plugin.cfg.NVIDIACDIHookPath, e.plugin.cfg.NVIDIADriverRoot = "/usr/bin/nvidia-cdi-hook", "/run/nvidia/driver"
			e.setIsolation(t, "limit")
			if _, err := e.allocateResp(t, tc.units); err != nil {
				t.Fatal(err)
			}
			spec, err := cdiapi.ReadSpec(nodecards.AllocationSpecPath(dir, string(pod.UID)+"_main"), 0)
			if err != nil {
				t.Fatalf("the CDI library refuses the written spec: %v", err)
			}
			edits := spec.Devices[0].ContainerEdits
			var want [][]string
			for i := range tc.alloc.For(gpushare.ContainerRef{}) {
				want = append(want, []string{"nvidia-cdi-hook", "apply-cuda-memory-limits", "--driver-root", "/run/nvidia/driver", "--gpu-id", uuid(i)})
			}
			var got [][]string
			for _, h := range edits.Hooks {
				if h.HookName != cdiapi.CreateRuntimeHook || h.Path != "/usr/bin/nvidia-cdi-hook" {
					t.Errorf("hook %+v, want a createRuntime hook at /usr/bin/nvidia-cdi-hook", h)
				}
				got = append(got, h.Args)
			}
			if d := cmp.Diff(want, got, cmpopts.SortSlices(func(a, b []string) bool { return a[5] < b[5] })); d != "" {
				t.Errorf("hooks' args (-want,+got):\n%s", d)
			}
			env := map[string]string{}
			for _, kv := range edits.Env {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
			for k, v := range map[string]string{gpushare.EnvToolkitMemRequest: tc.wantReq, gpushare.EnvToolkitMemRequests: tc.wantReq,
				gpushare.EnvToolkitMemLimit: tc.wantLim, gpushare.EnvToolkitMemLimits: tc.wantLim} {
				if env[k] != v {
					t.Errorf("%s=%q, want %q (env %v)", k, env[k], v, edits.Env)
				}
			}
		})
	}
}

// TestToolkitHookConfig: the toolkit's hook needs clean absolute paths and real cards; its
// driver root defaults to "/".
func TestToolkitHookConfig(t *testing.T) {
	tests := []struct {
		name     string
		c        Config
		wantRoot string
		wantErr  string
	}{
		{name: "unset", c: Config{}},
		{name: "default root", c: Config{NVIDIACDIHookPath: "/usr/bin/nvidia-cdi-hook"}, wantRoot: "/"},
		{name: "operator root", c: Config{NVIDIACDIHookPath: "/usr/bin/nvidia-cdi-hook", NVIDIADriverRoot: "/run/nvidia/driver"}, wantRoot: "/run/nvidia/driver"},
		{name: "relative hook", c: Config{NVIDIACDIHookPath: "bin/nvidia-cdi-hook"}, wantErr: "want a clean absolute path"},
		{name: "root without hook", c: Config{NVIDIADriverRoot: "/"}, wantErr: "without NVIDIA's CDI hook"},
		{name: "simulated cards", c: Config{NVIDIACDIHookPath: "/usr/bin/nvidia-cdi-hook", SimulatedCardDir: "/cdi/sim"}, wantErr: "cannot limit simulated cards"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.checkToolkitHook()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || tc.c.NVIDIADriverRoot != tc.wantRoot {
				t.Fatalf("error %v, root %q; want none and %q", err, tc.c.NVIDIADriverRoot, tc.wantRoot)
			}
		})
	}
}

package dra

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/nodecards"
)

// TestPrepareIsolation: on a node labelled for hard limits the claim's spec runs
// gpushare-limit-hook with the claim's memory per card, and the pod it is reserved for as the
// pod whose cgroup the hook limits to the claim's memory too; a claim reserved for no pod, and
// modes the back end cannot enforce, fail the claim.
func TestPrepareIsolation(t *testing.T) {
	const uid = "dddddddd-0000-4000-8000-000000000001"
	const pod = "eeeeeeee-0000-4000-8000-000000000001"
	iso := func(i gpushare.Isolation, err error) func(context.Context) (gpushare.Isolation, error) {
		return func(context.Context) (gpushare.Isolation, error) { return i, err }
	}
	tests := []struct {
		name        string
		isolation   func(context.Context) (gpushare.Isolation, error)
		unsupported error
		blocked     error // the runtime's verdict on a pod's own device requests
		claim       *resourceapi.ResourceClaim
		wantHook    []string // the hook's limit arguments; nil: no hook
		wantPod     []string // the hook's pod arguments
		wantErr     string
		wantReason  string
	}{
		{name: "no label", claim: claim(uid, "a", result("gpu", "gpu-0", "4Gi"))},
		{name: "none", isolation: iso(gpushare.IsolationNone, nil), claim: claim(uid, "a", result("gpu", "gpu-0", "4Gi"))},
		{name: "limit", isolation: iso(gpushare.IsolationLimit, nil), claim: forPods(claim(uid, "a", result("gpu", "gpu-0", "4Gi")), pod),
			wantHook: []string{"GPU-aaaa=4096"}, wantPod: []string{"--pod-uid=" + pod, "--pod-limit=GPU-aaaa=4096"}},
		{
			name: "limit per card of a two-card claim", isolation: iso(gpushare.IsolationLimit, nil),
			claim:    forPods(claim(uid, "b", result("a", "gpu-1", "2Gi"), result("b", "gpu-0", "3Gi"), result("c", "gpu-1", "1Gi")), pod),
			wantHook: []string{"GPU-bbbb=3072", "GPU-aaaa=3072"},
			wantPod:  []string{"--pod-uid=" + pod, "--pod-limit=GPU-aaaa=3072", "--pod-limit=GPU-bbbb=3072"},
		},
		{
			name: "limit, reserved for no pod", isolation: iso(gpushare.IsolationLimit, nil), claim: claim(uid, "a", result("gpu", "gpu-0", "4Gi")),
			wantErr: "reserved for no pod (reservedFor: 0 consumers)", wantReason: reasonNoPod,
		},
		{
			name: "limit, reserved for a consumer that is no pod", isolation: iso(gpushare.IsolationLimit, nil),
			claim: func() *resourceapi.ResourceClaim {
				c := claim(uid, "a", result("gpu", "gpu-0", "4Gi"))
				c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{APIGroup: "example.com", Resource: "jobs", Name: "j", UID: pod}}
				return c
			}(),
			wantErr: "reserved for no pod (reservedFor: 1 consumers)", wantReason: reasonNoPod,
		},
		{name: "limit the node cannot enforce", isolation: iso(gpushare.IsolationLimit, nil), unsupported: errors.New("driver too old"), claim: claim(uid, "a", result("gpu", "gpu-0", "4Gi")), wantErr: "cannot enforce it: driver too old"},
		{name: "limit where the runtime honours a pod's own device requests", isolation: iso(gpushare.IsolationLimit, nil), blocked: runtimeAccepts,
			claim: claim(uid, "a", result("gpu", "gpu-0", "4Gi")), wantErr: "cannot enforce it: gpushare.io/env-device-requests=accepted"},
		{name: "none where the runtime honours a pod's own device requests", isolation: iso(gpushare.IsolationNone, nil), blocked: runtimeAccepts,
			claim: claim(uid, "a", result("gpu", "gpu-0", "4Gi"))},
		{name: "mps", isolation: iso(gpushare.IsolationMPS, nil), claim: claim(uid, "a", result("gpu", "gpu-0", "4Gi")), wantErr: "which the DRA back end does not enforce"},
		{name: "a bad label", isolation: iso("", errors.New("node label gpushare.io/isolation=\"x\"")), claim: claim(uid, "a", result("gpu", "gpu-0", "4Gi")), wantErr: "reading node node-a's isolation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			cfg.Isolation, cfg.LimitUnsupported, cfg.LimitHookPath = tt.isolation, tt.unsupported, "/hook"
			cfg.IsolationBlocker = func() error { return tt.blocked }
			d := newTestDriver(t, cfg)
			res, _ := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{tt.claim})
			err := res[tt.claim.UID].Err
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("claim error %v, want %q", err, tt.wantErr)
				}
				if r := prepareReason(err); tt.wantReason != "" && r != tt.wantReason {
					t.Errorf("reason %q, want %q", r, tt.wantReason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := limitArgs(t, cfg, uid); strings.Join(got, " ") != strings.Join(tt.wantHook, " ") {
				t.Errorf("limit hook %v, want %v", got, tt.wantHook)
			}
			if got := podLimitArgs(t, cfg, uid); strings.Join(got, " ") != strings.Join(tt.wantPod, " ") {
				t.Errorf("limit hook's pod arguments %v, want %v", got, tt.wantPod)
			}
			if d.prepared[tt.claim.UID].Limit != (tt.wantHook != nil) {
				t.Errorf("recorded limit %v", d.prepared[tt.claim.UID].Limit)
			}

			// A repeat after a restart keeps the spec as prepared, whatever the label says now.
			cfg.Isolation = iso(gpushare.IsolationNone, nil)
			res, _ = newTestDriver(t, cfg).PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{tt.claim})
			if err := res[tt.claim.UID].Err; err != nil {
				t.Fatal(err)
			}
			if got := limitArgs(t, cfg, uid); strings.Join(got, " ") != strings.Join(tt.wantHook, " ") {
				t.Errorf("after a restart, limit hook %v, want %v", got, tt.wantHook)
			}
			if got := podLimitArgs(t, cfg, uid); strings.Join(got, " ") != strings.Join(tt.wantPod, " ") {
				t.Errorf("after a restart, limit hook's pod arguments %v, want %v", got, tt.wantPod)
			}
		})
	}
}

// limitArgs reads the claim's spec and returns its limit hook's <UUID>=<MiB> arguments; nil
// without a hook.
func limitArgs(t *testing.T, cfg DriverConfig, uid string) []string {
	t.Helper()
	return hookArgs(t, cfg, uid, false)
}

// podLimitArgs reads the claim's spec and returns its limit hook's --pod-uid and --pod-limit
// arguments; nil without a hook.
func podLimitArgs(t *testing.T, cfg DriverConfig, uid string) []string {
	t.Helper()
	return hookArgs(t, cfg, uid, true)
}

// forPods is c reserved for the pods with uids.
func forPods(c *resourceapi.ResourceClaim, uids ...string) *resourceapi.ResourceClaim {
	for _, u := range uids {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: "pod-" + u[:8], UID: types.UID(u)})
	}
	return c
}

// hookArgs is the limit hook's arguments in the claim's spec: the pod's flags when pod, else
// the container's limits; nil without a hook.
func hookArgs(t *testing.T, cfg DriverConfig, uid string, pod bool) []string {
	t.Helper()
	spec, err := cdiapi.ReadSpec(nodecards.ClaimSpecPath(cfg.Specs.Dir, types.UID(uid)), 0)
	if err != nil {
		t.Fatalf("the CDI library does not read the claim's spec: %v", err)
	}
	hooks := spec.GetDevice(uid).ContainerEdits.Hooks
	if len(hooks) == 0 {
		return nil
	}
	h := hooks[0]
	if len(hooks) != 1 || h.HookName != cdiapi.CreateRuntimeHook || h.Path != "/hook" || len(h.Args) < 3 || h.Args[1] != "--mode=simulated" {
		t.Fatalf("hooks %+v, want one createRuntime hook /hook in simulated mode", hooks)
	}
	var out []string
	for _, a := range h.Args[2:] {
		isPod := strings.HasPrefix(a, "--pod-")
		if pod && isPod || !pod && !strings.HasPrefix(a, "--") {
			out = append(out, a)
		}
	}
	return out
}

// TestPrepareSharedClaim: on a limit node a claim reserved for more than one pod fails with
// reason shared_claim and leaves no spec behind; elsewhere it prepares, and a claim for one
// pod prepares on a limit node.
func TestPrepareSharedClaim(t *testing.T) {
	const uid = "dddddddd-0000-4000-8000-000000000002"
	tests := []struct {
		name      string
		isolation gpushare.Isolation
		pods      []string
		wantErr   string
	}{
		{name: "limit, two pods", isolation: gpushare.IsolationLimit, pods: []string{"nb-1", "nb-2"},
			wantErr: "reserved for 2 consumers (pods/nb-1, pods/nb-2), and on a node labelled gpushare.io/isolation=limit a claim serves one pod"},
		{name: "limit, one pod", isolation: gpushare.IsolationLimit, pods: []string{"nb-1"}},
		{name: "none, two pods", isolation: gpushare.IsolationNone, pods: []string{"nb-1", "nb-2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			cfg.LimitHookPath = "/hook"
			cfg.Isolation = func(context.Context) (gpushare.Isolation, error) { return tt.isolation, nil }
			c := claim(uid, "shared", result("gpu", "gpu-0", "4Gi"))
			for _, p := range tt.pods {
				c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p, UID: types.UID("uid-" + p)})
			}
			res, _ := newTestDriver(t, cfg).PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c})
			err := res[c.UID].Err
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("claim error %v, want %q", err, tt.wantErr)
			}
			if r := prepareReason(err); r != reasonSharedClaim {
				t.Errorf("reason %q, want %q", r, reasonSharedClaim)
			}
			if _, statErr := os.Stat(nodecards.ClaimSpecPath(cfg.Specs.Dir, c.UID)); !os.IsNotExist(statErr) {
				t.Errorf("a refused claim left its spec: %v", statErr)
			}
		})
	}
}

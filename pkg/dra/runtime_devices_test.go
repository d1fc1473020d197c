package dra

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/gpushare/gpushare/pkg/nodecards"
)

// TestPrepareRuntimeCardDevices: a card whose <kind>=<UUID> device the runtime's CDI registry
// holds is handed over through it, before the claim's own device, and the claim's spec
// leaves that card's edits out; a card without one keeps them. A repeated prepare answers
// the same even when the registry changed since.
func TestPrepareRuntimeCardDevices(t *testing.T) {
	const uid = "11111111-2222-4333-8444-555555555555"
	kind := nodecards.DefaultCDIKind
	tests := []struct {
		name       string
		kind       string
		registered []int // card indexes the registry has a device for
		wantIDs    []string
		wantMounts []string // UUIDs whose files the claim's spec mounts
	}{
		{name: "registry holds both cards", kind: kind, registered: []int{0, 1},
			wantIDs: []string{kind + "=GPU-aaaa", kind + "=GPU-bbbb", nodecards.ClaimCDIKind + "=" + uid}},
		{name: "registry holds card 1 only", kind: kind, registered: []int{1},
			wantIDs: []string{kind + "=GPU-bbbb", nodecards.ClaimCDIKind + "=" + uid}, wantMounts: []string{"GPU-aaaa"}},
		{name: "empty registry", kind: kind,
			wantIDs: []string{nodecards.ClaimCDIKind + "=" + uid}, wantMounts: []string{"GPU-aaaa", "GPU-bbbb"}},
		{name: "no kind configured", registered: []int{0, 1},
			wantIDs: []string{nodecards.ClaimCDIKind + "=" + uid}, wantMounts: []string{"GPU-aaaa", "GPU-bbbb"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig(dir)
			registry := dir + "/registry"
			cfg.CDIKind, cfg.CDIRegistryDirs = tt.kind, []string{registry}
			var cards = testInventory().Devices
			var reg = cards[:0:0]
			for _, i := range tt.registered {
				reg = append(reg, cards[i])
			}
			if len(reg) > 0 {
				if _, err := nodecards.WriteSimulatedCDISpec(registry, kind, reg); err != nil {
					t.Fatal(err)
				}
			}
			d := newTestDriver(t, cfg)
			c := claim(uid, "two", result("a", "gpu-0", "2Gi"), result("b", "gpu-1", "2Gi"))
			prepare := func() []string {
				t.Helper()
				res, err := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c})
				if err != nil || res[types.UID(uid)].Err != nil {
					t.Fatalf("PrepareResourceClaims: %v, %v", err, res[types.UID(uid)].Err)
				}
				return res[types.UID(uid)].Devices[0].CDIDeviceIDs
			}
			if diff := cmp.Diff(tt.wantIDs, prepare()); diff != "" {
				t.Errorf("CDI devices (-want,+got):\n%s", diff)
			}
			spec, err := cdiapi.ReadSpec(nodecards.ClaimSpecPath(cfg.Specs.Dir, types.UID(uid)), 0)
			if err != nil {
				t.Fatalf("reading the claim's spec: %v", err)
			}
			var mounts []string
			for _, m := range spec.Devices[0].ContainerEdits.Mounts {
				for _, u := range []string{"GPU-aaaa", "GPU-bbbb"} {
					if strings.Contains(m.HostPath, u) {
						mounts = append(mounts, u)
					}
				}
			}
			slices.Sort(mounts)
			if diff := cmp.Diff(tt.wantMounts, mounts); diff != "" {
				t.Errorf("cards the claim's spec mounts (-want,+got):\n%s", diff)
			}
			if got := d.prepared[types.UID(uid)].RuntimeCDIDevices; !slices.Equal(got, tt.wantIDs[:len(tt.wantIDs)-1]) {
				t.Errorf("checkpointed runtime devices %v", got)
			}
			// The registry changes; a repeated prepare (kubelet restarted) answers as before.
			if _, err := nodecards.WriteSimulatedCDISpec(registry, kind, cards); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantIDs, prepare()); diff != "" {
				t.Errorf("repeated prepare's CDI devices (-want,+got):\n%s", diff)
			}
		})
	}
}

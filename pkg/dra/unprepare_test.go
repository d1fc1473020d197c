package dra

import (
	"context"
	"os"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/gpushare/gpushare/pkg/nodecards"
)

func TestUnprepareResourceClaims(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t.TempDir())
	d := newTestDriver(t, cfg)
	big := claim("bbbbbbbb-0000-4000-8000-000000000001", "big", result("gpu", "gpu-0", "14Gi"))
	res, _ := d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{big})
	if err := res[big.UID].Err; err != nil {
		t.Fatal(err)
	}
	path := nodecards.ClaimSpecPath(cfg.Specs.Dir, big.UID)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no spec after prepare: %v", err)
	}

	// After a restart, as kubelet may call it, and twice: the second finds nothing to do.
	restarted := newTestDriver(t, cfg)
	objs := []kubeletplugin.NamespacedObject{{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "big"}, UID: big.UID}}
	for i := range 2 {
		out, err := restarted.UnprepareResourceClaims(ctx, objs)
		if err != nil || len(out) != 1 || out[big.UID] != nil {
			t.Fatalf("unprepare #%d: %v, %v; want one nil result", i+1, out, err)
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("spec still there after unprepare: %v", err)
	}

	// The card is free again, also for a driver started after the unprepare.
	next := claim("bbbbbbbb-0000-4000-8000-000000000002", "next", result("gpu", "gpu-0", "14Gi"))
	res, _ = newTestDriver(t, cfg).PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{next})
	if err := res[next.UID].Err; err != nil {
		t.Errorf("the card is not free after unprepare: %v", err)
	}
}

func TestNewRefusesACorruptCheckpoint(t *testing.T) {
	cfg := testConfig(t.TempDir())
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg.DataDir+"/"+CheckpointFile, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewDriver(cfg); err == nil {
		t.Fatal("New accepted a corrupt checkpoint")
	}
}

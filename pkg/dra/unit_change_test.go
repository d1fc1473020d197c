package dra

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// TestNewRefusesAUnitChange: claims prepared in one unit are not read in another, and a
// checkpoint that records no unit is trusted only when it holds no claim.
func TestNewRefusesAUnitChange(t *testing.T) {
	const oneClaim = `"claims":{"uid-1":{"namespace":"team-a","name":"nb","cdiDeviceID":"gpushare.io/claim=uid-1",` +
		`"devices":[{"request":"gpu","pool":"node-a","device":"gpu-0","cardIndex":0,"cardUUID":"GPU-aaaa","units":4096}]}}`
	mib := gpushare.Unit{MiB: 1}
	tests := []struct {
		name       string
		checkpoint string
		unit       gpushare.Unit
		wantErr    []string // substrings of New's error; nil: New starts
	}{
		{name: "MiB to GiB", checkpoint: `{"version":1,"unitMiB":1,` + oneClaim + `}`, unit: gpushare.GiB,
			wantErr: []string{"--memory-unit=GiB", "claims team-a/nb", "prepared in MiB", "drain the node first", "kubectl drain node-a"}},
		{name: "GiB to MiB", checkpoint: `{"version":1,"unitMiB":1024,` + oneClaim + `}`, unit: mib,
			wantErr: []string{"--memory-unit=MiB", "claims team-a/nb", "prepared in GiB", "drain the node first"}},
		{name: "same unit", checkpoint: `{"version":1,"unitMiB":1,` + oneClaim + `}`, unit: mib},
		{name: "no unit recorded, claims", checkpoint: `{"version":1,` + oneClaim + `}`, unit: gpushare.GiB,
			wantErr: []string{"--memory-unit=GiB", "claims team-a/nb", "does not record", "drain the node first"}},
		{name: "no unit recorded, no claims", checkpoint: `{"version":1,"claims":{}}`, unit: mib},
		{name: "another unit, no claims", checkpoint: `{"version":1,"unitMiB":1024,"claims":{}}`, unit: mib},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			cfg.Inventory.Unit = tt.unit
			if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(cfg.DataDir, CheckpointFile), []byte(tt.checkpoint), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := NewDriver(cfg)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("New started")
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("New: %v; want it to say %q", err, want)
				}
			}
		})
	}
}

// TestCheckpointRecordsTheUnit: what the driver writes names its unit, so the next start
// can tell.
func TestCheckpointRecordsTheUnit(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Inventory.Unit = gpushare.Unit{MiB: 256}
	d := newTestDriver(t, cfg)
	c := claim("aaaaaaaa-0000-4000-8000-000000000001", "nb", result("gpu", "gpu-0", "1Gi"))
	res, _ := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c})
	if err := res[c.UID].Err; err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(cfg.DataDir, CheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"unitMiB":256`) {
		t.Errorf("checkpoint %s: want it to record unitMiB 256", b)
	}
	cfg.Inventory.Unit = gpushare.GiB
	if _, err := NewDriver(cfg); err == nil || !strings.Contains(err.Error(), "prepared in 256MiB") {
		t.Errorf("New with GiB after 256MiB: %v; want a refusal naming 256MiB", err)
	}
}

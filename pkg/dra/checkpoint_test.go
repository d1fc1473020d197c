package dra

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

func TestCheckpointRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", CheckpointFile)
	got, unit, err := loadCheckpoint(path)
	if err != nil || len(got) != 0 || unit != 0 {
		t.Fatalf("a missing checkpoint: %v, %d, %v; want no claims in no unit", got, unit, err)
	}
	share := types.UID("share-1")
	want := map[types.UID]PreparedClaim{
		"uid-1": {Namespace: "ns", Name: "nb", CDIDeviceID: "gpushare.io/claim=uid-1", Devices: []PreparedDevice{
			{Request: "gpu", Pool: "node-a", Device: "gpu-0", ShareID: &share, CardIndex: 0, CardUUID: "GPU-a", Units: 4},
		}},
	}
	if err := saveCheckpoint(path, gpushare.Unit{MiB: 512}, want); err != nil {
		t.Fatal(err)
	}
	got, unit, err = loadCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	if unit != 512 {
		t.Errorf("unit read back %d MiB, want 512", unit)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if err := saveCheckpoint(path, gpushare.GiB, map[types.UID]PreparedClaim{}); err != nil {
		t.Fatal(err)
	}
	if got, _, err = loadCheckpoint(path); err != nil || len(got) != 0 {
		t.Errorf("after saving none: %v, %v", got, err)
	}
	if m, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*")); len(m) != 0 {
		t.Errorf("temporary files left: %v", m)
	}
}

func TestCheckpointRefused(t *testing.T) {
	tests := []struct {
		name    string
		content string
		wantErr bool
	}{
		{name: "corrupt", content: `{"version":1,"claims":{`, wantErr: true},
		{name: "not JSON", content: "\x00\x01", wantErr: true},
		{name: "another version", content: `{"version":2,"claims":{}}`, wantErr: true},
		{name: "no version", content: `{"claims":{}}`, wantErr: true},
		{name: "version 1 without claims", content: `{"version":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), CheckpointFile)
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			claims, _, err := loadCheckpoint(path)
			if (err != nil) != tt.wantErr {
				t.Fatalf("loadCheckpoint(%q) = %v, %v; want error %v", tt.content, claims, err, tt.wantErr)
			}
			if err == nil && claims == nil {
				t.Errorf("nil claims map")
			}
		})
	}
}

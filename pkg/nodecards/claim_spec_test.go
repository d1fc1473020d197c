package nodecards

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

func TestWriteClaimSpec(t *testing.T) {
	cards := []gpushare.Device{{Index: 1, UUID: "GPU-b", Units: 14}}
	tests := []struct {
		name    string
		specs   func(dir string) CardSpecs
		uid     types.UID
		wantID  string
		wantErr bool
	}{
		{
			name:   "simulated card",
			specs:  func(dir string) CardSpecs { return CardSpecs{Dir: dir, SimulatedCardDir: SimulatedCardDir(dir)} },
			uid:    "0b7f5c2e-1111-4a4a-9a9a-000000000001",
			wantID: "gpushare.io/claim=0b7f5c2e-1111-4a4a-9a9a-000000000001",
		},
		{
			name:   "real card",
			specs:  func(dir string) CardSpecs { return CardSpecs{Dir: dir, Minors: map[string]int{"GPU-b": 3}} },
			uid:    "0b7f5c2e-1111-4a4a-9a9a-000000000002",
			wantID: "gpushare.io/claim=0b7f5c2e-1111-4a4a-9a9a-000000000002",
		},
		{
			name:    "real card without a minor",
			specs:   func(dir string) CardSpecs { return CardSpecs{Dir: dir} },
			uid:     "0b7f5c2e-1111-4a4a-9a9a-000000000003",
			wantErr: true,
		},
		{
			name:    "a UID that is no file name",
			specs:   func(dir string) CardSpecs { return CardSpecs{Dir: dir, SimulatedCardDir: SimulatedCardDir(dir)} },
			uid:     "../x",
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			id, err := tt.specs(dir).WriteClaimSpec(tt.uid, cards, map[string]string{"B": "2", "A": "1"}, nil)
			if (err != nil) != tt.wantErr {
				t.Fatalf("WriteClaimSpec() error = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) != 0 {
					t.Errorf("a failed write left %v", m)
				}
				return
			}
			if id != tt.wantID {
				t.Errorf("device ID %q, want %q", id, tt.wantID)
			}
			spec, err := cdiapi.ReadSpec(ClaimSpecPath(dir, tt.uid), 0)
			if err != nil {
				t.Fatalf("the CDI library does not read the spec: %v", err)
			}
			if spec.GetVendor() != allocationCDIVendor || spec.GetClass() != claimCDIClass || spec.GetDevice(string(tt.uid)) == nil {
				t.Errorf("spec kind %s/%s without device %s", spec.GetVendor(), spec.GetClass(), tt.uid)
			}
			if env := spec.GetDevice(string(tt.uid)).ContainerEdits.Env; len(env) != 2 || env[0] != "A=1" || env[1] != "B=2" {
				t.Errorf("env %v, want [A=1 B=2]", env)
			}
			for range 2 {
				if err := RemoveClaimSpec(dir, tt.uid); err != nil {
					t.Fatalf("RemoveClaimSpec: %v", err)
				}
			}
			if _, err := os.Stat(ClaimSpecPath(dir, tt.uid)); !os.IsNotExist(err) {
				t.Errorf("spec still there after RemoveClaimSpec: %v", err)
			}
		})
	}
}

// TestClaimSpecUIDs: only the files WriteClaimSpec names are listed, not other kinds' specs
// or a write's temporary file.
func TestClaimSpecUIDs(t *testing.T) {
	const a, b = types.UID("0b7f5c2e-1111-4a4a-9a9a-00000000000a"), types.UID("0b7f5c2e-1111-4a4a-9a9a-00000000000b")
	dir := t.TempDir()
	specs := CardSpecs{Dir: dir, SimulatedCardDir: SimulatedCardDir(dir)}
	cards := []gpushare.Device{{Index: 0, UUID: "GPU-a", Units: 14}}
	for _, uid := range []types.UID{b, a} {
		if _, err := specs.WriteClaimSpec(uid, cards, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	others := []string{
		"." + filepath.Base(ClaimSpecPath(dir, "0b7f5c2e-1111-4a4a-9a9a-00000000000c")) + ".tmp",
		filepath.Base(AllocationSpecPath(dir, "0b7f5c2e-1111-4a4a-9a9a-00000000000d_main")),
		filepath.Base(ClaimSpecPath(dir, "0b7f5c2e")) + ".bak",
		"nvidia.yaml",
	}
	for _, name := range others {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(ClaimSpecPath(dir, "0b7f5c2e-1111-4a4a-9a9a-00000000000e"), 0o750); err != nil {
		t.Fatal(err)
	}
	got, err := ClaimSpecUIDs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != a || got[1] != b {
		t.Errorf("ClaimSpecUIDs = %v, want [%s %s]", got, a, b)
	}
	if got, err := ClaimSpecUIDs(filepath.Join(dir, "missing")); err != nil || len(got) != 0 {
		t.Errorf("a missing folder: %v, %v; want none", got, err)
	}
}

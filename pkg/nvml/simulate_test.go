package nvml

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSimulate(t *testing.T) {
	tests := []struct {
		spec      string
		wantCards int
		wantErr   bool
	}{
		{spec: "t4:2", wantCards: 2},
		{spec: "t4,a100-80gb", wantCards: 2},
		{spec: "nope", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			sim, nv, err := Simulate("node-a", tt.spec)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Simulate(%q) error %v, want error %v", tt.spec, err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			devs, err := nv.Devices()
			if err != nil || len(devs) != tt.wantCards || sim == nil {
				t.Errorf("devices %v, %v; want %d cards and a simulator", devs, err, tt.wantCards)
			}
		})
	}
}

// TestSimulatedProcessKinds: the processes file's types come out as the same kinds with and
// without cgo (go-nvml's mock through Client, or the pure-Go simulator); no type is direct.
func TestSimulatedProcessKinds(t *testing.T) {
	sim, nv, err := Simulate("node-a", "t4")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "procs.yaml")
	sim.SetProcessesFile(path)
	body := "- {card: 0, pid: 10, usedMiB: 1, type: mps}\n- {card: 0, pid: 11, type: server}\n- {card: 0, pid: 12, type: direct}\n- {card: 0, pid: 13}\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := nv.Processes(0)
	if err != nil {
		t.Fatal(err)
	}
	want := []Process{{PID: 10, UsedBytes: 1 << 20, UsedKnown: true, Kind: ProcessMPSClient}, {PID: 11, Kind: ProcessMPSServer},
		{PID: 12, Kind: ProcessDirect}, {PID: 13, Kind: ProcessDirect}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Processes(0) (-want,+got):\n%s", diff)
	}
}

//go:build cgo

package nvml

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/google/go-cmp/cmp"
)

// TestClientProcesses drives Client over go-nvml's DGX A100 mock: compute and graphics lists
// merge into one entry per PID, NVML's "not available" is unknown (not 16 EiB), and a card
// without graphics support still lists its compute processes.
func TestClientProcesses(t *testing.T) {
	const gib = uint64(1) << 30
	notAvailable := uint64(math.MaxUint64)
	tests := []struct {
		name              string
		compute, graphics []nvml.ProcessInfo
		computeRet        nvml.Return
		graphicsRet       nvml.Return
		want              []Process
		wantErr           bool
	}{
		{
			name:     "compute only, PID order",
			compute:  []nvml.ProcessInfo{{Pid: 30, UsedGpuMemory: 5 * gib}, {Pid: 10, UsedGpuMemory: 3 * gib}},
			graphics: nil,
			want:     []Process{{PID: 10, UsedBytes: 3 * gib, UsedKnown: true}, {PID: 30, UsedBytes: 5 * gib, UsedKnown: true}},
		},
		{
			// PID 10 is C+G: one set of allocations reported in both lists, not 2+2.
			name:     "a PID in both lists is one entry, the larger figure",
			compute:  []nvml.ProcessInfo{{Pid: 10, UsedGpuMemory: 2 * gib}},
			graphics: []nvml.ProcessInfo{{Pid: 10, UsedGpuMemory: 2*gib + 1}, {Pid: 11, UsedGpuMemory: gib}},
			want:     []Process{{PID: 10, UsedBytes: 2*gib + 1, UsedKnown: true}, {PID: 11, UsedBytes: gib, UsedKnown: true}},
		},
		{
			name:    "not available is unknown",
			compute: []nvml.ProcessInfo{{Pid: 7, UsedGpuMemory: notAvailable}},
			want:    []Process{{PID: 7}},
		},
		{
			name:     "known beats not available for the same PID",
			compute:  []nvml.ProcessInfo{{Pid: 7, UsedGpuMemory: notAvailable}},
			graphics: []nvml.ProcessInfo{{Pid: 7, UsedGpuMemory: gib}},
			want:     []Process{{PID: 7, UsedBytes: gib, UsedKnown: true}},
		},
		{
			name:        "graphics not supported",
			compute:     []nvml.ProcessInfo{{Pid: 1, UsedGpuMemory: gib}},
			graphicsRet: nvml.ERROR_NOT_SUPPORTED,
			want:        []Process{{PID: 1, UsedBytes: gib, UsedKnown: true}},
		},
		{
			name:       "a failing list is an error",
			computeRet: nvml.ERROR_UNKNOWN,
			wantErr:    true,
		},
		{
			name: "no processes",
			want: []Process{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			server := dgxa100.New()
			d := server.Devices[3].(*dgxa100.Device)
			d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return tc.compute, retOr(tc.computeRet) }
			d.GetGraphicsRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return tc.graphics, retOr(tc.graphicsRet) }
			c, err := New(server)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Processes(3)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Processes(3) error = %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Processes(3) (-want,+got):\n%s", diff)
			}
		})
	}
	c, err := New(dgxa100.New())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Processes(8); err == nil {
		t.Error("Processes(8) on an 8-card server: want an error")
	}
}

func retOr(r nvml.Return) nvml.Return {
	if r == 0 {
		return nvml.SUCCESS
	}
	return r
}

// TestSimulatorProcessesFile: the simulated cards list the file's entries through the same
// Client code as real NVML, re-read on every call; an entry without usedMiB is unknown.
func TestSimulatorProcessesFile(t *testing.T) {
	cards, err := ParseSimSpec("t4:2")
	if err != nil {
		t.Fatal(err)
	}
	sim, err := NewSimulator("node-1", cards)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "procs.yaml")
	sim.SetProcessesFile(path)
	c, err := New(sim.Library())
	if err != nil {
		t.Fatal(err)
	}
	// No file yet: no processes.
	if got, err := c.Processes(0); err != nil || len(got) != 0 {
		t.Fatalf("Processes(0) without the file = %v, %v; want none", got, err)
	}
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("- {card: 0, pid: 100, usedMiB: 5120}\n- {card: \"" + SimulatedUUID("node-1", 1) + "\", pid: 200}\n")
	got, err := c.Processes(0)
	if diff := cmp.Diff([]Process{{PID: 100, UsedBytes: 5120 << 20, UsedKnown: true}}, got); err != nil || diff != "" {
		t.Errorf("Processes(0) err %v (-want,+got):\n%s", err, diff)
	}
	got, err = c.Processes(1)
	if diff := cmp.Diff([]Process{{PID: 200}}, got); err != nil || diff != "" {
		t.Errorf("Processes(1) err %v (-want,+got):\n%s", err, diff)
	}
	write("- {card: 0, pid: 100, usedMiB: 1024}\n")
	got, err = c.Processes(0)
	if diff := cmp.Diff([]Process{{PID: 100, UsedBytes: 1 << 30, UsedKnown: true}}, got); err != nil || diff != "" {
		t.Errorf("Processes(0) after rewrite err %v (-want,+got):\n%s", err, diff)
	}
	write("- {card: 5, pid: 100}\n")
	if _, err := c.Processes(0); err == nil {
		t.Error("a file naming a missing card: want an error")
	}
}

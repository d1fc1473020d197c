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

// TestClientProcesses drives Client over go-nvml's DGX A100 mock: compute, graphics and MPS
// lists merge into one entry per PID, NVML's "not available" is unknown (not 16 EiB), a card
// without graphics support still lists its compute processes, a process in the MPS list is
// an MPS client, one NVML names nvidia-cuda-mps-server the MPS server, any other direct; and
// without an MPS list no kind is known.
func TestClientProcesses(t *testing.T) {
	const gib = uint64(1) << 30
	notAvailable := uint64(math.MaxUint64)
	direct := func(pid uint32, used uint64) Process {
		return Process{PID: pid, UsedBytes: used, UsedKnown: true, Kind: ProcessDirect}
	}
	tests := []struct {
		name                   string
		compute, graphics, mps []nvml.ProcessInfo
		computeRet             nvml.Return
		graphicsRet            nvml.Return
		mpsRet                 nvml.Return
		names                  map[int]string // NVML's process names; others: ERROR_NOT_FOUND
		want                   []Process
		wantErr                bool
	}{
		{
			name:     "compute only, PID order",
			compute:  []nvml.ProcessInfo{{Pid: 30, UsedGpuMemory: 5 * gib}, {Pid: 10, UsedGpuMemory: 3 * gib}},
			graphics: nil,
			want:     []Process{direct(10, 3*gib), direct(30, 5*gib)},
		},
		{
			// PID 10 is C+G: one set of allocations reported in both lists, not 2+2.
			name:     "a PID in both lists is one entry, the larger figure",
			compute:  []nvml.ProcessInfo{{Pid: 10, UsedGpuMemory: 2 * gib}},
			graphics: []nvml.ProcessInfo{{Pid: 10, UsedGpuMemory: 2*gib + 1}, {Pid: 11, UsedGpuMemory: gib}},
			want:     []Process{direct(10, 2*gib+1), direct(11, gib)},
		},
		{
			name:    "not available is unknown",
			compute: []nvml.ProcessInfo{{Pid: 7, UsedGpuMemory: notAvailable}},
			want:    []Process{{PID: 7, Kind: ProcessDirect}},
		},
		{
			name:     "known beats not available for the same PID",
			compute:  []nvml.ProcessInfo{{Pid: 7, UsedGpuMemory: notAvailable}},
			graphics: []nvml.ProcessInfo{{Pid: 7, UsedGpuMemory: gib}},
			want:     []Process{direct(7, gib)},
		},
		{
			name:        "graphics not supported",
			compute:     []nvml.ProcessInfo{{Pid: 1, UsedGpuMemory: gib}},
			graphicsRet: nvml.ERROR_NOT_SUPPORTED,
			want:        []Process{direct(1, gib)},
		},
		{
			// nvidia-smi on an MPS card (R580): clients M+C, the server and a process that
			// bypassed MPS C.
			name:    "MPS card: clients, server, a direct process",
			compute: []nvml.ProcessInfo{{Pid: 5, UsedGpuMemory: gib}, {Pid: 6, UsedGpuMemory: 2 * gib}, {Pid: 9, UsedGpuMemory: 3 * gib}},
			mps:     []nvml.ProcessInfo{{Pid: 6, UsedGpuMemory: 2 * gib}, {Pid: 8, UsedGpuMemory: notAvailable}},
			names:   map[int]string{5: "nvidia-cuda-mps-server", 9: "/usr/bin/python3"},
			want: []Process{{PID: 5, UsedBytes: gib, UsedKnown: true, Kind: ProcessMPSServer},
				{PID: 6, UsedBytes: 2 * gib, UsedKnown: true, Kind: ProcessMPSClient},
				{PID: 8, Kind: ProcessMPSClient}, direct(9, 3*gib)},
		},
		{
			name:    "the server's name as a path",
			compute: []nvml.ProcessInfo{{Pid: 5, UsedGpuMemory: gib}},
			names:   map[int]string{5: "/usr/bin/nvidia-cuda-mps-server"},
			want:    []Process{{PID: 5, UsedBytes: gib, UsedKnown: true, Kind: ProcessMPSServer}},
		},
		{
			name:    "no MPS list: kinds unknown",
			compute: []nvml.ProcessInfo{{Pid: 5, UsedGpuMemory: gib}},
			mpsRet:  nvml.ERROR_FUNCTION_NOT_FOUND,
			names:   map[int]string{5: "nvidia-cuda-mps-server"},
			want:    []Process{{PID: 5, UsedBytes: gib, UsedKnown: true}},
		},
		{
			name:    "MPS list not supported: kinds unknown",
			compute: []nvml.ProcessInfo{{Pid: 5, UsedGpuMemory: gib}},
			mpsRet:  nvml.ERROR_NOT_SUPPORTED,
			want:    []Process{{PID: 5, UsedBytes: gib, UsedKnown: true}},
		},
		{
			name:    "a failing MPS list is an error",
			compute: []nvml.ProcessInfo{{Pid: 5, UsedGpuMemory: gib}},
			mpsRet:  nvml.ERROR_UNKNOWN,
			wantErr: true,
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
			d.GetMPSComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return tc.mps, retOr(tc.mpsRet) }
			server.SystemGetProcessNameFunc = func(pid int) (string, nvml.Return) {
				if n, ok := tc.names[pid]; ok {
					return n, nvml.SUCCESS
				}
				return "", nvml.ERROR_NOT_FOUND
			}
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
	if diff := cmp.Diff([]Process{{PID: 100, UsedBytes: 5120 << 20, UsedKnown: true, Kind: ProcessDirect}}, got); err != nil || diff != "" {
		t.Errorf("Processes(0) err %v (-want,+got):\n%s", err, diff)
	}
	got, err = c.Processes(1)
	if diff := cmp.Diff([]Process{{PID: 200, Kind: ProcessDirect}}, got); err != nil || diff != "" {
		t.Errorf("Processes(1) err %v (-want,+got):\n%s", err, diff)
	}
	write("- {card: 0, pid: 100, usedMiB: 1024, type: mps}\n- {card: 0, pid: 101, usedMiB: 512, type: server}\n- {card: 0, pid: 102, type: direct}\n")
	got, err = c.Processes(0)
	want := []Process{{PID: 100, UsedBytes: 1 << 30, UsedKnown: true, Kind: ProcessMPSClient},
		{PID: 101, UsedBytes: 512 << 20, UsedKnown: true, Kind: ProcessMPSServer}, {PID: 102, Kind: ProcessDirect}}
	if diff := cmp.Diff(want, got); err != nil || diff != "" {
		t.Errorf("Processes(0) after rewrite err %v (-want,+got):\n%s", err, diff)
	}
	write("- {card: 5, pid: 100}\n")
	if _, err := c.Processes(0); err == nil {
		t.Error("a file naming a missing card: want an error")
	}
}

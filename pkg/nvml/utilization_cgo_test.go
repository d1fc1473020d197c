//go:build cgo

package nvml

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/google/go-cmp/cmp"
)

// TestClientProcessUtilization drives Client over go-nvml's DGX A100 mock through a run of
// calls on one card: each call asks for samples newer than the newest the previous call
// returned, NOT_FOUND (nothing ran) is empty, NOT_SUPPORTED is ErrUtilizationUnsupported.
func TestClientProcessUtilization(t *testing.T) {
	type answer struct {
		samples []nvml.ProcessUtilizationSample
		ret     nvml.Return
	}
	tests := []struct {
		name      string
		answers   []answer
		wantSince []uint64 // the timestamp each call passes
		want      [][]ProcessUtilization
		wantErr   []error // nil: no error; errAny: some error
	}{
		{
			name: "time-slicing: two busy processes, then nothing new",
			answers: []answer{
				{samples: []nvml.ProcessUtilizationSample{{Pid: 20, TimeStamp: 100, SmUtil: 53}, {Pid: 10, TimeStamp: 90, SmUtil: 47, MemUtil: 12}}},
				{samples: []nvml.ProcessUtilizationSample{{Pid: 10, TimeStamp: 200, SmUtil: 30}, {Pid: 10, TimeStamp: 210, SmUtil: 50}}},
				{ret: nvml.ERROR_NOT_FOUND},
				{ret: nvml.ERROR_INSUFFICIENT_SIZE}, // go-nvml's answer to a count of 0
			},
			wantSince: []uint64{0, 100, 210, 210},
			want: [][]ProcessUtilization{
				{{PID: 10, SMPercent: 47, MemPercent: 12}, {PID: 20, SMPercent: 53}},
				{{PID: 10, SMPercent: 40}},
				{}, {},
			},
			wantErr: []error{nil, nil, nil, nil},
		},
		{
			name:      "MPS: the server alone",
			answers:   []answer{{samples: []nvml.ProcessUtilizationSample{{Pid: 5, TimeStamp: 7, SmUtil: 100}}}},
			wantSince: []uint64{0},
			want:      [][]ProcessUtilization{{{PID: 5, SMPercent: 100}}},
			wantErr:   []error{nil},
		},
		{
			name:      "not supported, no call",
			answers:   []answer{{ret: nvml.ERROR_NOT_SUPPORTED}, {ret: nvml.ERROR_FUNCTION_NOT_FOUND}},
			wantSince: []uint64{0, 0},
			want:      [][]ProcessUtilization{nil, nil},
			wantErr:   []error{ErrUtilizationUnsupported, ErrUtilizationUnsupported},
		},
		{
			name:      "another answer is an error and keeps the mark",
			answers:   []answer{{ret: nvml.ERROR_UNKNOWN}, {ret: nvml.ERROR_NOT_FOUND}},
			wantSince: []uint64{0, 0},
			want:      [][]ProcessUtilization{nil, {}},
			wantErr:   []error{errAny, nil},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			server := dgxa100.New()
			d := server.Devices[2].(*dgxa100.Device)
			call := 0
			var since []uint64
			d.GetProcessUtilizationFunc = func(s uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
				since = append(since, s)
				a := tc.answers[call]
				call++
				return a.samples, retOr(a.ret)
			}
			c, err := New(server)
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.answers {
				got, err := c.ProcessUtilization(2)
				switch {
				case tc.wantErr[i] == errAny && err == nil:
					t.Errorf("call %d: no error, want one", i)
				case tc.wantErr[i] != errAny && !errors.Is(err, tc.wantErr[i]):
					t.Errorf("call %d: error %v, want %v", i, err, tc.wantErr[i])
				}
				if diff := cmp.Diff(tc.want[i], got); diff != "" {
					t.Errorf("call %d (-want,+got):\n%s", i, diff)
				}
			}
			if diff := cmp.Diff(tc.wantSince, since); diff != "" {
				t.Errorf("timestamps passed (-want,+got):\n%s", diff)
			}
			// Other cards keep their own mark.
			server.Devices[3].(*dgxa100.Device).GetProcessUtilizationFunc = func(s uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
				if s != 0 {
					t.Errorf("card 3 asked since %d, want 0", s)
				}
				return nil, nvml.ERROR_NOT_FOUND
			}
			if _, err := c.ProcessUtilization(3); err != nil {
				t.Errorf("card 3: %v", err)
			}
		})
	}
	c, err := New(dgxa100.New())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ProcessUtilization(8); err == nil {
		t.Error("ProcessUtilization(8) on an 8-card server: want an error")
	}
}

// TestSimulatorUtilization: the simulated cards report the smUtil of the file's entries
// through the same Client code as real NVML; entries without it have no sample.
func TestSimulatorUtilization(t *testing.T) {
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
	if got, err := c.ProcessUtilization(0); err != nil || len(got) != 0 {
		t.Fatalf("without the file = %v, %v; want none", got, err)
	}
	body := "- {card: 0, pid: 100, usedMiB: 5120, smUtil: 47}\n- {card: 0, pid: 101, smUtil: 53}\n- {card: 0, pid: 102}\n- {card: 1, pid: 200, smUtil: 100, type: server}\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := c.ProcessUtilization(0)
	if diff := cmp.Diff([]ProcessUtilization{{PID: 100, SMPercent: 47}, {PID: 101, SMPercent: 53}}, got); err != nil || diff != "" {
		t.Errorf("card 0 err %v (-want,+got):\n%s", err, diff)
	}
	got, err = c.ProcessUtilization(1)
	if diff := cmp.Diff([]ProcessUtilization{{PID: 200, SMPercent: 100}}, got); err != nil || diff != "" {
		t.Errorf("card 1 err %v (-want,+got):\n%s", err, diff)
	}
}

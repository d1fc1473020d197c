package limithook

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseArgs(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    Args
		wantErr bool
	}{
		{
			name: "nvml, two cards",
			args: []string{"--mode=nvml", "GPU-a=4096", "GPU-b=1024"},
			want: Args{Mode: ModeNVML, ProcRoot: DefaultProcRoot, CgroupRoot: DefaultCgroupRoot, Deadline: DefaultDeadline,
				Limits: []Limit{{UUID: "GPU-a", MiB: 4096}, {UUID: "GPU-b", MiB: 1024}}},
		},
		{
			name: "simulated",
			args: []string{"--mode=simulated", "--simulated-card-dir=/c", "GPU-a=1024"},
			want: Args{Mode: ModeSimulated, SimulatedCardDir: "/c", ProcRoot: DefaultProcRoot, CgroupRoot: DefaultCgroupRoot, Deadline: DefaultDeadline,
				Limits: []Limit{{UUID: "GPU-a", MiB: 1024}}},
		},
		{
			name: "deadline and failure folder",
			args: []string{"--deadline=5s", "--failure-dir=/var/lib/gpushare/limit-hook-failures", "GPU-a=1"},
			want: Args{Mode: ModeNVML, ProcRoot: DefaultProcRoot, CgroupRoot: DefaultCgroupRoot, Deadline: 5 * time.Second,
				FailureDir: "/var/lib/gpushare/limit-hook-failures", Limits: []Limit{{UUID: "GPU-a", MiB: 1}}},
		},
		{name: "zero deadline", args: []string{"--deadline=0s", "GPU-a=1"}, wantErr: true},
		{name: "negative deadline", args: []string{"--deadline=-1s", "GPU-a=1"}, wantErr: true},
		{name: "deadline over the cap", args: []string{"--deadline=" + (MaxDeadline + time.Second).String(), "GPU-a=1"}, wantErr: true},
		{name: "deadline without a unit", args: []string{"--deadline=20", "GPU-a=1"}, wantErr: true},
		{name: "relative failure folder", args: []string{"--failure-dir=failures", "GPU-a=1"}, wantErr: true},
		{name: "simulated without its folder", args: []string{"--mode=simulated", "GPU-a=1"}, wantErr: true},
		{name: "unknown mode", args: []string{"--mode=env", "GPU-a=1"}, wantErr: true},
		{name: "no limit", args: []string{"--mode=nvml"}, wantErr: true},
		{name: "zero", args: []string{"GPU-a=0"}, wantErr: true},
		{name: "not MiB", args: []string{"GPU-a=4G"}, wantErr: true},
		{name: "no UUID", args: []string{"=4"}, wantErr: true},
		{name: "UUID with a slash", args: []string{"../x=4"}, wantErr: true},
		{name: "unknown flag", args: []string{"--env=CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "GPU-a=1"}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseArgs(tc.args)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseArgs(%q) error = %v, want error %v", tc.args, err, tc.wantErr)
			}
			if d := cmp.Diff(tc.want, got); !tc.wantErr && d != "" {
				t.Errorf("ParseArgs(%q) (-want +got):\n%s", tc.args, d)
			}
		})
	}
}

// FormatArgs writes what ParseArgs reads, argv[0] first, whatever the fields set.
func TestFormatArgsRoundTrip(t *testing.T) {
	limits := []Limit{{UUID: "GPU-a", MiB: 2048}, {UUID: "GPU-b", MiB: 1024}}
	full := func(a Args) Args { // what ParseArgs fills in for a field left out
		if a.ProcRoot == "" {
			a.ProcRoot = DefaultProcRoot
		}
		if a.CgroupRoot == "" {
			a.CgroupRoot = DefaultCgroupRoot
		}
		if a.Deadline == 0 {
			a.Deadline = DefaultDeadline
		}
		return a
	}
	tests := []struct {
		name string
		args Args
	}{
		{name: "nvml", args: Args{Mode: ModeNVML, Limits: limits}},
		{name: "simulated", args: Args{Mode: ModeSimulated, SimulatedCardDir: "/cdi/cards", Limits: limits}},
		{name: "deadline and failure folder", args: Args{Mode: ModeNVML, Deadline: 1500 * time.Millisecond, FailureDir: DefaultFailureDir, Limits: limits}},
		{name: "the default deadline", args: Args{Mode: ModeNVML, Deadline: DefaultDeadline, Limits: limits}},
		{name: "the longest deadline", args: Args{Mode: ModeSimulated, SimulatedCardDir: "/c", Deadline: MaxDeadline, FailureDir: "/f", Limits: limits}},
		{name: "other roots", args: Args{Mode: ModeNVML, ProcRoot: "/host/proc", CgroupRoot: "/host/cgroup", Limits: limits}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := FormatArgs("/var/lib/gpushare/bin/gpushare-limit-hook", tc.args)
			if args[0] != "/var/lib/gpushare/bin/gpushare-limit-hook" {
				t.Errorf("argv[0] = %q", args[0])
			}
			got, err := ParseArgs(args[1:])
			if err != nil {
				t.Fatalf("ParseArgs(FormatArgs = %q) = %v", args, err)
			}
			if d := cmp.Diff(full(tc.args), got); d != "" {
				t.Errorf("round trip of %q (-want +got):\n%s", args, d)
			}
		})
	}
}

// An error after the flags were read keeps the failure folder, so the failure is recorded.
func TestParseArgsErrorKeepsFailureDir(t *testing.T) {
	a, err := ParseArgs([]string{"--failure-dir=/f", "--mode=env", "GPU-a=1"})
	if err == nil || a.FailureDir != "/f" {
		t.Errorf("ParseArgs = %+v, %v; want an error and FailureDir /f", a, err)
	}
}

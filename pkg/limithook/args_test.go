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
			args: append(podArgs("GPU-a=6144", "GPU-b=1024"), "--mode=nvml", "GPU-a=4096", "GPU-b=1024"),
			want: Args{Mode: ModeNVML, ProcRoot: DefaultProcRoot, CgroupRoot: DefaultCgroupRoot, Deadline: DefaultDeadline,
				Limits: []Limit{{UUID: "GPU-a", MiB: 4096}, {UUID: "GPU-b", MiB: 1024}},
				PodUID: testPodUID, PodLimits: []Limit{{UUID: "GPU-a", MiB: 6144}, {UUID: "GPU-b", MiB: 1024}}},
		},
		{
			name: "simulated",
			args: append(podArgs("GPU-a=1024"), "--mode=simulated", "--simulated-card-dir=/c", "GPU-a=1024"),
			want: Args{Mode: ModeSimulated, SimulatedCardDir: "/c", ProcRoot: DefaultProcRoot, CgroupRoot: DefaultCgroupRoot, Deadline: DefaultDeadline,
				Limits: []Limit{{UUID: "GPU-a", MiB: 1024}}, PodUID: testPodUID, PodLimits: []Limit{{UUID: "GPU-a", MiB: 1024}}},
		},
		{
			name: "deadline and failure folder",
			args: append(podArgs("GPU-a=1"), "--deadline=5s", "--failure-dir=/var/lib/gpushare/limit-hook-failures", "GPU-a=1"),
			want: Args{Mode: ModeNVML, ProcRoot: DefaultProcRoot, CgroupRoot: DefaultCgroupRoot, Deadline: 5 * time.Second,
				FailureDir: "/var/lib/gpushare/limit-hook-failures", Limits: []Limit{{UUID: "GPU-a", MiB: 1}},
				PodUID: testPodUID, PodLimits: []Limit{{UUID: "GPU-a", MiB: 1}}},
		},
		{
			name: "a pod limit on a card the container does not have",
			args: append(podArgs("GPU-a=2", "GPU-b=3"), "GPU-a=1"),
			want: Args{Mode: ModeNVML, ProcRoot: DefaultProcRoot, CgroupRoot: DefaultCgroupRoot, Deadline: DefaultDeadline,
				Limits: []Limit{{UUID: "GPU-a", MiB: 1}}, PodUID: testPodUID, PodLimits: []Limit{{UUID: "GPU-a", MiB: 2}, {UUID: "GPU-b", MiB: 3}}},
		},
		{
			name: "a static pod's UID (a hash, no dashes)",
			args: []string{"--pod-uid=6f1e2d3c4b5a69788796a5b4c3d2e1f0", "--pod-limit=GPU-a=1", "GPU-a=1"},
			want: Args{Mode: ModeNVML, ProcRoot: DefaultProcRoot, CgroupRoot: DefaultCgroupRoot, Deadline: DefaultDeadline,
				Limits: []Limit{{UUID: "GPU-a", MiB: 1}}, PodUID: "6f1e2d3c4b5a69788796a5b4c3d2e1f0", PodLimits: []Limit{{UUID: "GPU-a", MiB: 1}}},
		},
		{
			name: "a container and its pod above their grants",
			args: append(podArgs("GPU-a=6144:16384"), "GPU-a=4096:12288"),
			want: Args{Mode: ModeNVML, ProcRoot: DefaultProcRoot, CgroupRoot: DefaultCgroupRoot, Deadline: DefaultDeadline,
				Limits: []Limit{{UUID: "GPU-a", MiB: 12288, SoftMiB: 4096}}, PodUID: testPodUID, PodLimits: []Limit{{UUID: "GPU-a", MiB: 16384, SoftMiB: 6144}}},
		},
		{
			name: "soft equal to hard is a plain limit",
			args: append(podArgs("GPU-a=2:2"), "GPU-a=2:2"),
			want: Args{Mode: ModeNVML, ProcRoot: DefaultProcRoot, CgroupRoot: DefaultCgroupRoot, Deadline: DefaultDeadline,
				Limits: []Limit{{UUID: "GPU-a", MiB: 2}}, PodUID: testPodUID, PodLimits: []Limit{{UUID: "GPU-a", MiB: 2}}},
		},
		{name: "soft above hard", args: append(podArgs("GPU-a=8"), "GPU-a=4:2"), wantErr: true},
		{name: "soft of zero", args: append(podArgs("GPU-a=8"), "GPU-a=0:2"), wantErr: true},
		{name: "no hard after the colon", args: append(podArgs("GPU-a=8"), "GPU-a=2:"), wantErr: true},
		{name: "three parts", args: append(podArgs("GPU-a=8"), "GPU-a=1:2:3"), wantErr: true},
		{name: "a pod's hard limit below the container's", args: append(podArgs("GPU-a=4:6"), "GPU-a=2:8"), wantErr: true},
		{name: "a pod's soft limit below the container's", args: append(podArgs("GPU-a=1:8"), "GPU-a=2:8"), wantErr: true},
		{name: "zero deadline", args: append(podArgs("GPU-a=1"), "--deadline=0s", "GPU-a=1"), wantErr: true},
		{name: "negative deadline", args: append(podArgs("GPU-a=1"), "--deadline=-1s", "GPU-a=1"), wantErr: true},
		{name: "deadline over the cap", args: append(podArgs("GPU-a=1"), "--deadline="+(MaxDeadline+time.Second).String(), "GPU-a=1"), wantErr: true},
		{name: "deadline without a unit", args: append(podArgs("GPU-a=1"), "--deadline=20", "GPU-a=1"), wantErr: true},
		{name: "relative failure folder", args: append(podArgs("GPU-a=1"), "--failure-dir=failures", "GPU-a=1"), wantErr: true},
		{name: "simulated without its folder", args: append(podArgs("GPU-a=1"), "--mode=simulated", "GPU-a=1"), wantErr: true},
		{name: "unknown mode", args: append(podArgs("GPU-a=1"), "--mode=env", "GPU-a=1"), wantErr: true},
		{name: "no limit", args: append(podArgs("GPU-a=1"), "--mode=nvml"), wantErr: true},
		{name: "zero", args: append(podArgs("GPU-a=1"), "GPU-a=0"), wantErr: true},
		{name: "not MiB", args: append(podArgs("GPU-a=1"), "GPU-a=4G"), wantErr: true},
		{name: "no UUID", args: append(podArgs("GPU-a=1"), "=4"), wantErr: true},
		{name: "UUID with a slash", args: append(podArgs("GPU-a=1"), "../x=4"), wantErr: true},
		{name: "unknown flag", args: append(podArgs("GPU-a=1"), "--env=CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "GPU-a=1"), wantErr: true},
		{name: "no pod UID", args: []string{"--pod-limit=GPU-a=1", "GPU-a=1"}, wantErr: true},
		{name: "a pod UID with a slash", args: []string{"--pod-uid=../x", "--pod-limit=GPU-a=1", "GPU-a=1"}, wantErr: true},
		{name: "a pod UID in systemd's escaping", args: []string{"--pod-uid=0b5c1f0e_8d1e", "--pod-limit=GPU-a=1", "GPU-a=1"}, wantErr: true},
		{name: "no pod limit", args: []string{"--pod-uid=" + testPodUID, "GPU-a=1"}, wantErr: true},
		{name: "no pod limit on the container's card", args: append(podArgs("GPU-b=4"), "GPU-a=1"), wantErr: true},
		{name: "a pod limit below the container's", args: append(podArgs("GPU-a=1"), "GPU-a=2"), wantErr: true},
		{name: "a card's pod limit twice", args: append(podArgs("GPU-a=2", "GPU-a=3"), "GPU-a=1"), wantErr: true},
		{name: "a pod limit of zero", args: append(podArgs("GPU-a=0"), "GPU-a=1"), wantErr: true},
		{name: "a pod limit that is not MiB", args: append(podArgs("GPU-a=1G"), "GPU-a=1"), wantErr: true},
		{name: "a pod limit without a card", args: append(podArgs("4096"), "GPU-a=1"), wantErr: true},
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
	podLimits := []Limit{{UUID: "GPU-b", MiB: 3072}, {UUID: "GPU-a", MiB: 2048}, {UUID: "GPU-c", MiB: 512}}
	full := func(a Args) Args { // what ParseArgs fills in for a field left out
		if a.PodUID == "" {
			a.PodUID, a.PodLimits = testPodUID, podLimits
		}
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
		{name: "limits above the grants", args: Args{Mode: ModeNVML, Limits: []Limit{{UUID: "GPU-a", MiB: 2048, SoftMiB: 1024}, {UUID: "GPU-b", MiB: 1024}}}},
		{name: "other roots", args: Args{Mode: ModeNVML, ProcRoot: "/host/proc", CgroupRoot: "/host/cgroup", Limits: limits}},
		{name: "a pod on one card", args: Args{Mode: ModeNVML, Limits: limits[:1], PodUID: "6f1e2d3c4b5a69788796a5b4c3d2e1f0", PodLimits: []Limit{{UUID: "GPU-a", MiB: 4096}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.args = full(tc.args)
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
	a, err := ParseArgs([]string{"--failure-dir=/f", "--mode=env", "--pod-uid=" + testPodUID, "--pod-limit=GPU-a=1", "GPU-a=1"})
	if err == nil || a.FailureDir != "/f" {
		t.Errorf("ParseArgs = %+v, %v; want an error and FailureDir /f", a, err)
	}
}

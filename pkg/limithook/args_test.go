package limithook

import (
	"testing"

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
			want: Args{Mode: ModeNVML, ProcRoot: DefaultProcRoot, CgroupRoot: DefaultCgroupRoot,
				Limits: []Limit{{UUID: "GPU-a", MiB: 4096}, {UUID: "GPU-b", MiB: 1024}}},
		},
		{
			name: "simulated",
			args: []string{"--mode=simulated", "--simulated-card-dir=/c", "GPU-a=1024"},
			want: Args{Mode: ModeSimulated, SimulatedCardDir: "/c", ProcRoot: DefaultProcRoot, CgroupRoot: DefaultCgroupRoot,
				Limits: []Limit{{UUID: "GPU-a", MiB: 1024}}},
		},
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

// FormatArgs writes what ParseArgs reads, argv[0] first.
func TestFormatArgsRoundTrip(t *testing.T) {
	limits := []Limit{{UUID: "GPU-a", MiB: 2048}, {UUID: "GPU-b", MiB: 1024}}
	for _, mode := range []Mode{ModeNVML, ModeSimulated} {
		args := FormatArgs("/var/lib/gpushare/bin/gpushare-limit-hook", mode, "/cdi/cards", limits)
		if args[0] != "/var/lib/gpushare/bin/gpushare-limit-hook" {
			t.Errorf("%s: argv[0] = %q", mode, args[0])
		}
		got, err := ParseArgs(args[1:])
		if err != nil {
			t.Fatalf("%s: ParseArgs(FormatArgs) = %v", mode, err)
		}
		if got.Mode != mode || !cmp.Equal(got.Limits, limits) {
			t.Errorf("%s: round trip = %+v", mode, got)
		}
		if mode == ModeSimulated && got.SimulatedCardDir != "/cdi/cards" {
			t.Errorf("simulated card folder = %q", got.SimulatedCardDir)
		}
	}
}

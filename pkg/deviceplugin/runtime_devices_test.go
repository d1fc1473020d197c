package deviceplugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	cdi "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// TestRuntimeCardDevices: a card is named by the runtime's own device only when the
// registry holds <kind>=<UUID>; NVIDIA's index names do not match, and a spec that does not
// parse is skipped without hiding the others.
func TestRuntimeCardDevices(t *testing.T) {
	cards := []gpushare.Device{{Index: 0, UUID: uuid(0)}, {Index: 1, UUID: uuid(1)}}
	tests := []struct {
		name        string
		files       map[string]string // file name → content, besides NVIDIA's spec
		nvidia      int               // cards of NVIDIA's spec by UUID (writeNVIDIASpec)
		wantFound   []string
		wantMissing []string // UUIDs
	}{
		{name: "no spec", wantMissing: []string{uuid(0), uuid(1)}},
		{name: "UUID names", nvidia: 2, wantFound: []string{DefaultCDIKind + "=" + uuid(0), DefaultCDIKind + "=" + uuid(1)}},
		{name: "one card named", nvidia: 1, wantFound: []string{DefaultCDIKind + "=" + uuid(0)}, wantMissing: []string{uuid(1)}},
		{
			name:        "index names only",
			files:       map[string]string{"nvidia.yaml": "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: \"0\"\n  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia0\n      type: c\n      major: 195\n      minor: 0\n"},
			wantMissing: []string{uuid(0), uuid(1)},
		},
		{
			name: "a broken spec beside NVIDIA's", nvidia: 2,
			files:     map[string]string{"broken.json": "{"},
			wantFound: []string{DefaultCDIKind + "=" + uuid(0), DefaultCDIKind + "=" + uuid(1)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.nvidia > 0 {
				writeNVIDIASpec(t, dir, tc.nvidia)
			}
			for name, content := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			found, missing := runtimeCardDevices([]string{dir, filepath.Join(dir, "absent")}, DefaultCDIKind, cards)
			var missingUUIDs []string
			for _, c := range missing {
				missingUUIDs = append(missingUUIDs, c.UUID)
			}
			if d := cmp.Diff(tc.wantFound, found); d != "" {
				t.Errorf("found (-want,+got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantMissing, missingUUIDs); d != "" {
				t.Errorf("missing (-want,+got):\n%s", d)
			}
		})
	}
}

// TestInjectionOrderDecidesEnv: the CDI library applies devices' env in the order it is
// given them, so the allocation's NVIDIA_VISIBLE_DEVICES is the container's only after
// NVIDIA's device: the reason handOver names the allocation's device last.
func TestInjectionOrderDecidesEnv(t *testing.T) {
	nvidia := DefaultCDIKind + "=" + uuid(0)
	alloc := AllocationCDIKind + "=uid-p_main"
	tests := []struct {
		name    string
		devices []string
		want    string
	}{
		{name: "NVIDIA's first", devices: []string{nvidia, alloc}, want: uuid(0)},
		{name: "the allocation's first", devices: []string{alloc, nvidia}, want: "void"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeNVIDIASpec(t, dir, 1)
			spec, err := allocationSpec("uid-p_main", cdi.ContainerEdits{}, map[string]string{gpushare.EnvVisibleDevices: uuid(0)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			writeTestSpec(t, filepath.Join(dir, allocationSpecPrefix+"uid-p_main.json"), spec)
			env, _ := containerEnvAfterCDI(t, dir, tc.devices...)
			if got := env[gpushare.EnvVisibleDevices]; got != tc.want {
				t.Errorf("%s = %q, want %q", gpushare.EnvVisibleDevices, got, tc.want)
			}
		})
	}
}

func writeTestSpec(t *testing.T, path string, spec *cdi.Spec) {
	t.Helper()
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

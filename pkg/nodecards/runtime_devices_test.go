package nodecards

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/gpushare"
	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

func uuid(i int) string { return gpunvml.SimulatedUUID("node-a", i) }

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
			found, missing := RuntimeCardDevices([]string{dir, filepath.Join(dir, "absent")}, DefaultCDIKind, cards)
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

// writeNVIDIASpec writes into dir a CDI spec of kind DefaultCDIKind as
// `nvidia-ctk cdi generate --device-name-strategy=uuid` shapes it for the cards uuid(0) to
// uuid(n-1): a device per card UUID with its device node, and spec-wide edits with the
// control node and NVIDIA_VISIBLE_DEVICES=void.
func writeNVIDIASpec(t *testing.T, dir string, n int) {
	t.Helper()
	spec := map[string]any{
		"cdiVersion": "0.5.0",
		"kind":       DefaultCDIKind,
		"containerEdits": map[string]any{
			"env":         []string{gpushare.EnvVisibleDevices + "=void"},
			"deviceNodes": []map[string]any{{"path": "/dev/nvidiactl", "type": "c", "major": 195, "minor": 255}},
		},
	}
	var devices []map[string]any
	for i := range n {
		devices = append(devices, map[string]any{"name": uuid(i), "containerEdits": map[string]any{
			"deviceNodes": []map[string]any{{"path": fmt.Sprintf("/dev/nvidia%d", i), "type": "c", "major": 195, "minor": i}},
		}})
	}
	spec["devices"] = devices
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nvidia.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

package preflight

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIsolationBlocker: only a runtime configuration that refuses an unprivileged pod's own
// NVIDIA_VISIBLE_DEVICES lets limits and MPS hold; every other verdict, a missing file and
// no file at all block, naming the key to set.
func TestIsolationBlocker(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name string
		path string
		want string // "": nil
	}{
		{name: "refused", path: write("refused.toml", "accept-nvidia-visible-devices-envvar-when-unprivileged = false\n")},
		{name: "accepted by default", path: write("default.toml", "[nvidia-container-runtime]\nmode = \"auto\"\n"),
			want: "env-device-requests=accepted"},
		{name: "accepted", path: write("accepted.toml", "accept-nvidia-visible-devices-envvar-when-unprivileged = true\n"),
			want: "env-device-requests=accepted"},
		{name: "unparsable", path: write("bad.toml", "accept-nvidia-visible-devices-envvar-when-unprivileged = \n"),
			want: "env-device-requests=unknown"},
		{name: "missing file", path: filepath.Join(dir, "absent.toml"), want: "env-device-requests=unknown"},
		{name: "not read", path: "", want: "--nvidia-runtime-config is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := IsolationBlocker(tt.path)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("IsolationBlocker = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("IsolationBlocker = %v, want an error saying %q", err, tt.want)
			}
			if tt.path != "" && !strings.Contains(err.Error(), "accept-nvidia-visible-devices-envvar-when-unprivileged = false") {
				t.Errorf("%v does not say what to set", err)
			}
			if tt.path == "" && !errors.Is(err, ErrNotRead) {
				t.Errorf("%v is not ErrNotRead", err)
			}
		})
	}
}

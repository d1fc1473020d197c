package preflight

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// TestCheck covers the configurations a node can have; the TOML is shaped as nvidia-ctk
// writes it (top-level keys, then tables).
func TestCheck(t *testing.T) {
	tests := []struct {
		name       string
		file       *string // nil: no file
		want       gpushare.EnvDeviceRequests
		wantMode   string
		wantUnsafe bool
		reasonHas  []string
	}{
		{name: "no file", want: gpushare.EnvDeviceRequestsUnknown, reasonHas: []string{"no NVIDIA container runtime configuration"}},
		{name: "key absent: the default accepts", file: ptr("disable-require = false\n[nvidia-container-cli]\nldconfig = \"@/sbin/ldconfig\"\n"),
			want: gpushare.EnvDeviceRequestsAccepted, wantMode: "auto", wantUnsafe: true, reasonHas: []string{"does not set", "default is true"}},
		{name: "empty file", file: ptr(""), want: gpushare.EnvDeviceRequestsAccepted, wantMode: "auto", wantUnsafe: true},
		{name: "true", file: ptr("accept-nvidia-visible-devices-envvar-when-unprivileged = true\n"),
			want: gpushare.EnvDeviceRequestsAccepted, wantMode: "auto", wantUnsafe: true, reasonHas: []string{"= true"}},
		{name: "false", file: ptr("accept-nvidia-visible-devices-envvar-when-unprivileged = false\n[nvidia-container-runtime]\nmode = \"legacy\"\n"),
			want: gpushare.EnvDeviceRequestsRefused, wantMode: "legacy", reasonHas: []string{"= false", "mode legacy"}},
		{name: "cdi mode does not by itself refuse", file: ptr("[nvidia-container-runtime]\nmode = \"cdi\"\n"),
			want: gpushare.EnvDeviceRequestsAccepted, wantMode: "cdi", wantUnsafe: true},
		{name: "cdi mode, false", file: ptr("accept-nvidia-visible-devices-envvar-when-unprivileged = false\n[nvidia-container-runtime]\nmode = \"cdi\"\n"),
			want: gpushare.EnvDeviceRequestsRefused, wantMode: "cdi"},
		{name: "false, volume mounts named", file: ptr("accept-nvidia-visible-devices-envvar-when-unprivileged = false\naccept-nvidia-visible-devices-as-volume-mounts = true\n"),
			want: gpushare.EnvDeviceRequestsRefused, wantMode: "auto", reasonHas: []string{"as-volume-mounts = true", "hostPath"}},
		{name: "malformed: fail closed", file: ptr("accept-nvidia-visible-devices-envvar-when-unprivileged = \n"),
			want: gpushare.EnvDeviceRequestsUnknown, wantUnsafe: true, reasonHas: []string{"parsing", "assumed to honour"}},
		{name: "wrong type: fail closed", file: ptr("accept-nvidia-visible-devices-envvar-when-unprivileged = \"false\"\n"),
			want: gpushare.EnvDeviceRequestsUnknown, wantUnsafe: true, reasonHas: []string{"parsing"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.toml")
			if tc.file != nil {
				if err := os.WriteFile(path, []byte(*tc.file), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			v := Check(path)
			if v.State != tc.want || v.Mode != tc.wantMode || v.Unsafe != tc.wantUnsafe {
				t.Errorf("Check = %+v, want state %s, mode %q, unsafe %v", v, tc.want, tc.wantMode, tc.wantUnsafe)
			}
			for _, want := range append(tc.reasonHas, path) {
				if !strings.Contains(v.Reason, want) {
					t.Errorf("reason %q lacks %q", v.Reason, want)
				}
			}
		})
	}
}

// TestReadNVIDIAConfigTooLarge: a file over the bound is an error, not read whole.
func TestReadNVIDIAConfigTooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(path, []byte("# "+strings.Repeat("x", maxConfigBytes)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadNVIDIAConfig(path); err == nil || !strings.Contains(err.Error(), "over") {
		t.Errorf("ReadNVIDIAConfig of a 1 MiB file: %v, want an error", err)
	}
}

func ptr(s string) *string { return &s }

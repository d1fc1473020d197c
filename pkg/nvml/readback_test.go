//go:build cgo

package nvml

import (
	"errors"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// TestReadMemoryLimits: the limits the driver answers come back in bytes; an old library,
// an unknown card and another answer are errors naming what failed.
func TestReadMemoryLimits(t *testing.T) {
	tests := []struct {
		name      string
		ret       nvml.Return
		lookupErr error
		uuid      string
		want      MemoryLimits
		wantErr   string
	}{
		{name: "read", ret: nvml.SUCCESS, uuid: "GPU-a", want: MemoryLimits{SoftBytes: 1 << 30, HardBytes: 1 << 30, UsedBytes: 5 << 20}},
		{name: "old library", lookupErr: errors.New("undefined symbol"), uuid: "GPU-a", wantErr: "no nvmlDeviceGetMemoryLimits_v1"},
		{name: "unknown card", ret: nvml.SUCCESS, uuid: "GPU-z", wantErr: "card GPU-z"},
		{name: "not supported", ret: nvml.ERROR_NOT_SUPPORTED, uuid: "GPU-a", wantErr: "reading the limits of cgroup /sys/fs/cgroup/pod"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lib := limitsLib(tc.ret, tc.lookupErr)
			dev, _ := lib.DeviceGetHandleByUUID("GPU-a")
			dev.(*mock.Device).GetMemoryLimits_v1Func = func(cg string) (nvml.MemoryLimits_v1, nvml.Return) {
				if cg != "/sys/fs/cgroup/pod" {
					t.Errorf("read the limits of %q", cg)
				}
				return nvml.MemoryLimits_v1{SoftLimit: 1 << 30, HardLimit: 1 << 30, CurrentUsed: 5 << 20}, tc.ret
			}
			got, err := readMemoryLimits(lib, tc.uuid, "/sys/fs/cgroup/pod")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestDriverVersion: NVML's answer is returned as it is.
func TestDriverVersion(t *testing.T) {
	lib := limitsLib(nvml.SUCCESS, nil)
	lib.SystemGetDriverVersionFunc = func() (string, nvml.Return) { return "615.10", nvml.SUCCESS }
	if v, err := driverVersion(lib); err != nil || v != "615.10" {
		t.Fatalf("driverVersion = %q, %v", v, err)
	}
	lib.SystemGetDriverVersionFunc = func() (string, nvml.Return) { return "", nvml.ERROR_UNKNOWN }
	if _, err := driverVersion(lib); err == nil {
		t.Fatal("driverVersion: no error for an unknown answer")
	}
}

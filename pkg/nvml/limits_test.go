//go:build cgo

package nvml

import (
	"errors"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// limitsLib is an NVML library with the card GPU-a, answering SetMemoryLimits_v1 and
// GetMemoryLimits_v1 with ret and LookupSymbol with lookupErr.
func limitsLib(ret nvml.Return, lookupErr error) *mock.Interface {
	dev := &mock.Device{
		SetMemoryLimits_v1Func: func(string, uint64, uint64) nvml.Return { return ret },
		GetMemoryLimits_v1Func: func(string) (nvml.MemoryLimits_v1, nvml.Return) { return nvml.MemoryLimits_v1{}, ret },
	}
	return &mock.Interface{
		InitFunc:     func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc: func() nvml.Return { return nvml.SUCCESS },
		DeviceGetHandleByUUIDFunc: func(u string) (nvml.Device, nvml.Return) {
			if u == "GPU-a" {
				return dev, nvml.SUCCESS
			}
			return nil, nvml.ERROR_NOT_FOUND
		},
		ExtensionsFunc: func() nvml.ExtendedInterface {
			return &mock.ExtendedInterface{LookupSymbolFunc: func(string) error { return lookupErr }}
		},
	}
}

// TestMemoryLimiter: each NVML answer to the limit calls becomes the error MemoryLimiter
// documents, naming the card, and a probe fails only where the call does not exist.
func TestMemoryLimiter(t *testing.T) {
	tests := []struct {
		name      string
		ret       nvml.Return
		uuid      string
		wantSet   error  // nil: success, errAny: an error that is neither sentinel
		wantText  string // in the set error
		wantProbe error
	}{
		{name: "success", ret: nvml.SUCCESS, uuid: "GPU-a"},
		{name: "not supported", ret: nvml.ERROR_NOT_SUPPORTED, uuid: "GPU-a", wantSet: ErrLimitsUnsupported, wantText: "card GPU-a", wantProbe: ErrLimitsUnsupported},
		{name: "old library", ret: nvml.ERROR_FUNCTION_NOT_FOUND, uuid: "GPU-a", wantSet: ErrLimitsUnsupported, wantText: "card GPU-a", wantProbe: ErrLimitsUnsupported},
		{name: "cgroup not opened", ret: nvml.ERROR_OPERATING_SYSTEM, uuid: "GPU-a", wantSet: ErrCgroupNotOpened, wantText: "cannot open cgroup /sys/fs/cgroup/pod"},
		{name: "another answer", ret: nvml.ERROR_UNKNOWN, uuid: "GPU-a", wantSet: errAny, wantText: "setting a 1024 MiB limit on cgroup /sys/fs/cgroup/pod"},
		{name: "unknown card", ret: nvml.SUCCESS, uuid: "GPU-z", wantSet: errAny, wantText: "card GPU-z", wantProbe: errAny},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := OpenMemoryLimiter(limitsLib(tc.ret, nil))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			err = m.SetMemoryLimits(tc.uuid, "/sys/fs/cgroup/pod", 1024<<20, 1024<<20)
			checkLimitErr(t, "SetMemoryLimits", err, tc.wantSet)
			if err != nil && !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("SetMemoryLimits error %q does not say %q", err, tc.wantText)
			}
			checkLimitErr(t, "ProbeMemoryLimits", m.ProbeMemoryLimits(tc.uuid, "/sys/fs/cgroup"), tc.wantProbe)
		})
	}
}

// errAny stands for an error that is neither ErrLimitsUnsupported nor ErrCgroupNotOpened.
var errAny = errors.New("any other error")

func checkLimitErr(t *testing.T, call string, err, want error) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Errorf("%s = %v, want nil", call, err)
	case want == errAny && (err == nil || errors.Is(err, ErrLimitsUnsupported) || errors.Is(err, ErrCgroupNotOpened)):
		t.Errorf("%s = %v, want an error of another kind", call, err)
	case want != nil && want != errAny && !errors.Is(err, want):
		t.Errorf("%s = %v, want %v", call, err, want)
	}
}

func TestMemoryLimiterHasLimitCall(t *testing.T) {
	for _, tc := range []struct {
		lookupErr error
		wantErr   bool
	}{{nil, false}, {errors.New("undefined symbol"), true}} {
		m, err := OpenMemoryLimiter(limitsLib(nvml.SUCCESS, tc.lookupErr))
		if err != nil {
			t.Fatal(err)
		}
		err = m.HasLimitCall()
		if (err != nil) != tc.wantErr || err != nil && !strings.Contains(err.Error(), LimitCall) {
			t.Errorf("HasLimitCall with lookup error %v = %v, want error %v naming %s", tc.lookupErr, err, tc.wantErr, LimitCall)
		}
		m.Close()
	}
}

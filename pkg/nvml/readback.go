//go:build cgo

package nvml

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// readLimitCall is LimitCall's counterpart that reads a cgroup's limits back.
const readLimitCall = "nvmlDeviceGetMemoryLimits_v1"

// DriverVersion loads the driver's NVML (SystemLibrary(path)) and returns the driver's
// version as NVML reports it ("580.65.06"). The product never asks: hack/gpu-acceptance.sh
// prints it when the machine has no nvidia-smi.
func DriverVersion(path string) (string, error) {
	return driverVersion(SystemLibrary(path))
}

func driverVersion(lib Library) (string, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return "", fmt.Errorf("initialising NVML: %v", nvml.ErrorString(ret))
	}
	defer lib.Shutdown()
	v, ret := lib.SystemGetDriverVersion()
	if ret != nvml.SUCCESS {
		return "", fmt.Errorf("reading the driver version: %v", nvml.ErrorString(ret))
	}
	return v, nil
}

// ReadMemoryLimits loads the driver's NVML (SystemLibrary(path)) and reads back the limits
// the driver holds for the cgroup v2 at host path cgroup on the card with uuid, as
// MemoryLimiter.SetMemoryLimits set them. The product never reads them back (the driver
// enforces what it was told); hack/gpu-acceptance.sh checks that gpushare-limit-hook's
// limits arrived. Errors: NVML does not initialise, lacks the call (a driver before R615),
// does not find the card, or answers otherwise than SUCCESS.
func ReadMemoryLimits(path, uuid, cgroup string) (MemoryLimits, error) {
	return readMemoryLimits(SystemLibrary(path), uuid, cgroup)
}

func readMemoryLimits(lib Library, uuid, cgroup string) (MemoryLimits, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return MemoryLimits{}, fmt.Errorf("initialising NVML: %v", nvml.ErrorString(ret))
	}
	defer lib.Shutdown()
	// go-nvml resolves a call's symbol when it is made: ask first, so that an old driver
	// gives an error rather than a crash.
	if err := lib.Extensions().LookupSymbol(readLimitCall); err != nil {
		return MemoryLimits{}, fmt.Errorf("the NVML library has no %s (%v)", readLimitCall, err)
	}
	dev, ret := lib.DeviceGetHandleByUUID(uuid)
	if ret != nvml.SUCCESS {
		return MemoryLimits{}, fmt.Errorf("card %s: finding it in NVML: %v", uuid, nvml.ErrorString(ret))
	}
	l, ret := dev.GetMemoryLimits_v1(cgroup)
	if ret != nvml.SUCCESS {
		return MemoryLimits{}, fmt.Errorf("card %s: reading the limits of cgroup %s: %v", uuid, cgroup, nvml.ErrorString(ret))
	}
	return MemoryLimits{SoftBytes: l.SoftLimit, HardBytes: l.HardLimit, UsedBytes: l.CurrentUsed}, nil
}

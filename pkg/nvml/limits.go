//go:build cgo

package nvml

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// memoryLimiter is MemoryLimiter over an initialised go-nvml library (real or mock).
type memoryLimiter struct{ lib nvml.Interface }

var _ MemoryLimiter = memoryLimiter{}

// OpenMemoryLimiter initialises lib (SystemLibrary for the driver's) and returns its memory
// limit calls; Close releases it. Errors: NVML does not initialise. Whether the library
// has LimitCall is HasLimitCall's to say.
func OpenMemoryLimiter(lib Library) (MemoryLimiter, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("initialising NVML: %v", nvml.ErrorString(ret))
	}
	return memoryLimiter{lib: lib}, nil
}

func (m memoryLimiter) HasLimitCall() error {
	if err := m.lib.Extensions().LookupSymbol(LimitCall); err != nil {
		return fmt.Errorf("the NVML library has no %s (%v)", LimitCall, err)
	}
	return nil
}

func (m memoryLimiter) SetMemoryLimits(uuid, cgroup string, soft, hard uint64) error {
	dev, err := m.device(uuid)
	if err != nil {
		return err
	}
	switch ret := dev.SetMemoryLimits_v1(cgroup, soft, hard); ret {
	case nvml.SUCCESS:
		return nil
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND:
		return fmt.Errorf("card %s: %w here (%v)", uuid, ErrLimitsUnsupported, nvml.ErrorString(ret))
	case nvml.ERROR_OPERATING_SYSTEM:
		return fmt.Errorf("card %s: %w %s (%v)", uuid, ErrCgroupNotOpened, cgroup, nvml.ErrorString(ret))
	default:
		return fmt.Errorf("card %s: setting a %d MiB limit on cgroup %s: %v", uuid, hard>>20, cgroup, nvml.ErrorString(ret))
	}
}

func (m memoryLimiter) ProbeMemoryLimits(uuid, cgroup string) error {
	dev, err := m.device(uuid)
	if err != nil {
		return err
	}
	switch _, ret := dev.GetMemoryLimits_v1(cgroup); ret {
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND:
		return fmt.Errorf("card %s: %w (%v)", uuid, ErrLimitsUnsupported, nvml.ErrorString(ret))
	}
	return nil
}

func (m memoryLimiter) Close() { _ = m.lib.Shutdown() }

// device is the handle of the card with uuid. Errors: NVML does not find it.
func (m memoryLimiter) device(uuid string) (nvml.Device, error) {
	dev, ret := m.lib.DeviceGetHandleByUUID(uuid)
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("card %s: finding it in NVML: %v", uuid, nvml.ErrorString(ret))
	}
	return dev, nil
}

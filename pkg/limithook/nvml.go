//go:build cgo

package limithook

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// setLimitsSymbol is the NVML call the hook needs; drivers before R615 lack it.
const setLimitsSymbol = "nvmlDeviceSetMemoryLimits_v1"

// requirements is what the driver's per-cgroup limits need, for error messages.
const requirements = "per-cgroup GPU memory limits need NVIDIA driver R615 or later, the cgroup v2 hierarchy, and a whole card (not a MIG instance)"

// NVMLSetter sets limits through NVML (nvmlDeviceSetMemoryLimits_v1) on the cgroup v2
// hierarchy at CgroupRoot. Lib must be initialised.
type NVMLSetter struct {
	Lib        nvml.Interface
	CgroupRoot string
}

var _ Setter = NVMLSetter{}

// AcceptsV1 is false: the driver limits cgroup v2 paths only.
func (NVMLSetter) AcceptsV1() bool { return false }

// SetLimit sets the soft and hard limit of card l.UUID for cg to l: the grant is both what
// the ledger guarantees the container and the most it may allocate. Errors name the card,
// and for NOT_SUPPORTED the driver and cgroup requirements.
func (s NVMLSetter) SetLimit(_ context.Context, _ string, cg Cgroup, l Limit) error {
	if cg.Version != 2 {
		return fmt.Errorf("card %s: cgroup %s is not on cgroup v2: %s", l.UUID, cg.Path, requirements)
	}
	dev, ret := s.Lib.DeviceGetHandleByUUID(l.UUID)
	if ret != nvml.SUCCESS {
		return fmt.Errorf("card %s: finding it in NVML: %v", l.UUID, nvml.ErrorString(ret))
	}
	ns := filepath.Join(s.CgroupRoot, cg.Path)
	switch ret := dev.SetMemoryLimits_v1(ns, l.Bytes(), l.Bytes()); ret {
	case nvml.SUCCESS:
		return nil
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND:
		return fmt.Errorf("card %s: NVML does not support memory limits here (%v): %s", l.UUID, nvml.ErrorString(ret), requirements)
	case nvml.ERROR_OPERATING_SYSTEM:
		return fmt.Errorf("card %s: the driver cannot open cgroup %s (%v): %s", l.UUID, ns, nvml.ErrorString(ret), requirements)
	default:
		return fmt.Errorf("card %s: setting a %d MiB limit on cgroup %s: %v", l.UUID, l.MiB, ns, nvml.ErrorString(ret))
	}
}

// NVMLSupport reports whether NVML can limit memory per cgroup on the cards uuids with the
// cgroup v2 hierarchy at cgroupRoot: nil, or why not. lib must be initialised. The driver is
// asked for the limits of the hierarchy's root cgroup on each card: NOT_SUPPORTED (or a
// library without the call) means no. Any other answer means the call exists for the card;
// whether it works for a container's cgroup the hook finds out, and a failure there stops
// that container from starting, so nothing runs unlimited on a wrong guess here.
func NVMLSupport(lib nvml.Interface, cgroupRoot string, uuids []string) error {
	if err := CgroupV2Mounted(cgroupRoot); err != nil {
		return fmt.Errorf("%w: %s", err, requirements)
	}
	if err := lib.Extensions().LookupSymbol(setLimitsSymbol); err != nil {
		return fmt.Errorf("the NVML library has no %s (%v): %s", setLimitsSymbol, err, requirements)
	}
	for _, uuid := range uuids {
		dev, ret := lib.DeviceGetHandleByUUID(uuid)
		if ret != nvml.SUCCESS {
			return fmt.Errorf("card %s: finding it in NVML: %v", uuid, nvml.ErrorString(ret))
		}
		switch _, ret := dev.GetMemoryLimits_v1(cgroupRoot); ret {
		case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND:
			return fmt.Errorf("card %s: NVML does not support memory limits (%v): %s", uuid, nvml.ErrorString(ret), requirements)
		}
	}
	return nil
}

// OpenNVML loads the driver's NVML (libnvidia-ml.so.1, or libraryPath) and returns the
// setter the hook uses on the hierarchy at cgroupRoot; close releases the library. Errors:
// NVML does not initialise, or lacks the call (a driver before R615).
func OpenNVML(libraryPath, cgroupRoot string) (s NVMLSetter, close func(), err error) {
	var opts []nvml.LibraryOption
	if libraryPath != "" {
		opts = append(opts, nvml.WithLibraryPath(libraryPath))
	}
	lib := nvml.New(opts...)
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return NVMLSetter{}, nil, fmt.Errorf("initialising NVML: %v", nvml.ErrorString(ret))
	}
	if err := lib.Extensions().LookupSymbol(setLimitsSymbol); err != nil {
		_ = lib.Shutdown()
		return NVMLSetter{}, nil, fmt.Errorf("the NVML library has no %s (%v): %s", setLimitsSymbol, err, requirements)
	}
	return NVMLSetter{Lib: lib, CgroupRoot: cgroupRoot}, func() { _ = lib.Shutdown() }, nil
}

// SystemSupport is NVMLSupport for the driver's library (libnvidia-ml.so.1, or
// libraryPath), loaded and released here.
func SystemSupport(libraryPath, cgroupRoot string, uuids []string) error {
	s, closeLib, err := OpenNVML(libraryPath, cgroupRoot)
	if err != nil {
		return err
	}
	defer closeLib()
	return NVMLSupport(s.Lib, cgroupRoot, uuids)
}

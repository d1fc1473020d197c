//go:build cgo

package limithook

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

// requirements is what the driver's per-cgroup limits need, for error messages.
const requirements = "per-cgroup GPU memory limits need NVIDIA driver R615 or later, the cgroup v2 hierarchy, and a whole card (not a MIG instance)"

// NVMLSetter sets limits through NVML (gpunvml.LimitCall) on the cgroup v2 hierarchy at
// CgroupRoot. Lib must be open.
type NVMLSetter struct {
	Lib        gpunvml.MemoryLimiter
	CgroupRoot string
}

var _ Setter = NVMLSetter{}

// AcceptsV1 is false: the driver limits cgroup v2 paths only.
func (NVMLSetter) AcceptsV1() bool { return false }

// Callee is NVML's limit call.
func (NVMLSetter) Callee() (who, call string) { return "NVML", gpunvml.LimitCall }

// SetLimit sets the soft limit of card l.UUID for cg to l.Soft() and the hard limit to
// l.MiB: the grant is what the ledger guarantees the cgroup, and it may allocate beyond it up
// to its memory limit where its pod declares one (soft = hard = grant where not). Errors name the card,
// and where the node cannot limit memory the driver and cgroup requirements; they are tagged
// with their reason (ReasonOf). The call is not bounded here: Run abandons it at the deadline.
func (s NVMLSetter) SetLimit(_ context.Context, _ string, cg Cgroup, l Limit) error {
	if cg.Version != 2 {
		return failed(ReasonCgroup, l.UUID, fmt.Errorf("card %s: cgroup %s is not on cgroup v2: %s", l.UUID, cg.Path, requirements))
	}
	err := s.Lib.SetMemoryLimits(l.UUID, filepath.Join(s.CgroupRoot, cg.Path), l.SoftBytes(), l.Bytes())
	switch {
	case errors.Is(err, gpunvml.ErrLimitsUnsupported):
		return failed(ReasonUnsupported, l.UUID, fmt.Errorf("%w: %s", err, requirements))
	case errors.Is(err, gpunvml.ErrCgroupNotOpened):
		return failed(ReasonCgroup, l.UUID, fmt.Errorf("%w: %s", err, requirements))
	}
	return failed(ReasonNVML, l.UUID, err)
}

// NVMLSupport reports whether NVML can limit memory per cgroup on the cards uuids with the
// cgroup v2 hierarchy at cgroupRoot: nil, or why not. lib must be open. The driver is asked
// for the limits of the hierarchy's root cgroup on each card: NOT_SUPPORTED (or a library
// without the call) means no. Any other answer means the call exists for the card; whether
// it works for a container's cgroup the hook finds out, and a failure there stops that
// container from starting, so nothing runs unlimited on a wrong guess here.
func NVMLSupport(lib gpunvml.MemoryLimiter, cgroupRoot string, uuids []string) error {
	if err := CgroupV2Mounted(cgroupRoot); err != nil {
		return fmt.Errorf("%w: %s", err, requirements)
	}
	if err := lib.HasLimitCall(); err != nil {
		return fmt.Errorf("%w: %s", err, requirements)
	}
	for _, uuid := range uuids {
		err := lib.ProbeMemoryLimits(uuid, cgroupRoot)
		if errors.Is(err, gpunvml.ErrLimitsUnsupported) {
			return fmt.Errorf("%w: %s", err, requirements)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// OpenNVML loads the driver's NVML (libnvidia-ml.so.1, or libraryPath) and returns the
// setter the hook uses on the hierarchy at cgroupRoot; close releases the library. Errors:
// NVML does not initialise (ReasonNVML), or lacks the call, a driver before R615
// (ReasonUnsupported). It is not bounded here: the hook abandons it at its deadline.
func OpenNVML(libraryPath, cgroupRoot string) (s NVMLSetter, close func(), err error) {
	lib, err := gpunvml.OpenMemoryLimiter(gpunvml.SystemLibrary(libraryPath))
	if err != nil {
		return NVMLSetter{}, nil, failed(ReasonNVML, "", err)
	}
	if err := lib.HasLimitCall(); err != nil {
		lib.Close()
		return NVMLSetter{}, nil, failed(ReasonUnsupported, "", fmt.Errorf("%w: %s", err, requirements))
	}
	return NVMLSetter{Lib: lib, CgroupRoot: cgroupRoot}, lib.Close, nil
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

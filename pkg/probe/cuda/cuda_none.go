//go:build !linux || nocuda

package cuda

import (
	"fmt"

	"github.com/gpushare/gpushare/pkg/probe"
)

// DefaultLibrary is the driver library the NVIDIA container runtime mounts.
const DefaultLibrary = "libcuda.so.1"

// Open reports probe.ErrNoDriver: this build does not load libraries. Loading one needs the
// C library's dynamic loader, so the build for images without one (the scratch images of
// simulated GPUs, -tags nocuda) leaves it out, as does every OS but Linux.
func Open(lib string) (probe.Driver, error) {
	return nil, fmt.Errorf("%w: this gpushare-probe is built without loading %s (static, -tags nocuda, or not Linux)", probe.ErrNoDriver, lib)
}

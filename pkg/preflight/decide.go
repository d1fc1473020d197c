package preflight

import (
	"errors"
	"fmt"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// Verdict is what a node's NVIDIA runtime configuration says about device requests a pod
// makes in its own environment.
type Verdict struct {
	State gpushare.EnvDeviceRequests
	// Reason says why, naming the key and the file, for the log and the node event.
	Reason string
	// Mode is the runtime's nvidia-container-runtime.mode ("auto" when not set; "" when the
	// file could not be read).
	Mode string
	// Unsafe: tenants must be assumed able to widen their cards (accepted, or a file that
	// does not parse: fail closed). share-plugin warns on the node.
	Unsafe bool
}

// acceptEnvvarKey is the NVIDIA container runtime's setting that decides whether an
// unprivileged container's own NVIDIA_VISIBLE_DEVICES selects its cards (default true).
const acceptEnvvarKey = "accept-nvidia-visible-devices-envvar-when-unprivileged"

// Decide turns the result of ReadNVIDIAConfig at path into a Verdict. The runtime's mode
// does not change it: in cdi mode the toolkit turns the variable into nvidia.com/gpu CDI
// names under the same key (internal/config/image CUDA.VisibleDevices in
// NVIDIA/nvidia-container-toolkit). Requests by volume mount need a hostPath of /dev/null,
// which Pod Security baseline refuses; they are named in the reason only.
func Decide(path string, c NVIDIAConfig, err error) Verdict {
	switch {
	case errors.Is(err, ErrNoConfig):
		return Verdict{State: gpushare.EnvDeviceRequestsUnknown,
			Reason: fmt.Sprintf("no NVIDIA container runtime configuration at %s: whether the runtime honours a pod's own NVIDIA_VISIBLE_DEVICES cannot be told (simulated GPUs, no NVIDIA container toolkit, or one configured elsewhere: see --nvidia-runtime-config)", path)}
	case err != nil:
		return Verdict{State: gpushare.EnvDeviceRequestsUnknown, Unsafe: true,
			Reason: fmt.Sprintf("%v: assumed to honour a pod's own NVIDIA_VISIBLE_DEVICES, as the runtime's default does", err)}
	}
	mode := "auto"
	if c.Runtime.Mode != nil {
		mode = *c.Runtime.Mode
	}
	v := Verdict{Mode: mode}
	const key = acceptEnvvarKey
	switch {
	case c.AcceptEnvvarUnprivileged == nil:
		v.State, v.Unsafe = gpushare.EnvDeviceRequestsAccepted, true
		v.Reason = fmt.Sprintf("%s does not set %s, whose default is true: an unprivileged pod's own NVIDIA_VISIBLE_DEVICES selects its cards (mode %s)", path, key, mode)
	case *c.AcceptEnvvarUnprivileged:
		v.State, v.Unsafe = gpushare.EnvDeviceRequestsAccepted, true
		v.Reason = fmt.Sprintf("%s sets %s = true: an unprivileged pod's own NVIDIA_VISIBLE_DEVICES selects its cards (mode %s)", path, key, mode)
	default:
		v.State = gpushare.EnvDeviceRequestsRefused
		v.Reason = fmt.Sprintf("%s sets %s = false: the runtime ignores an unprivileged pod's own NVIDIA_VISIBLE_DEVICES (mode %s)", path, key, mode)
	}
	if c.AcceptVolumeMounts != nil && *c.AcceptVolumeMounts {
		v.Reason += "; accept-nvidia-visible-devices-as-volume-mounts = true also honours devices requested by mounting the host's /dev/null, which needs a hostPath volume (refused by Pod Security baseline)"
	}
	return v
}

// Check reads the configuration at path and decides.
func Check(path string) Verdict {
	c, err := ReadNVIDIAConfig(path)
	return Decide(path, c, err)
}

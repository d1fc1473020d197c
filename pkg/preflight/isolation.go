package preflight

import (
	"errors"
	"fmt"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// ErrNotRead is why isolation cannot be vouched for on a node whose share-plugin reads no
// NVIDIA runtime configuration (--nvidia-runtime-config empty).
var ErrNotRead = errors.New("share-plugin reads no NVIDIA container runtime configuration (--nvidia-runtime-config is empty), so whether a pod's own NVIDIA_VISIBLE_DEVICES reaches the node's cards cannot be told")

// IsolationBlocker says why the isolation modes that hold a container to its grant
// (gpushare.IsolationLimit, gpushare.IsolationMPS) cannot hold on a node whose NVIDIA
// container runtime configuration is at path: nil only when the runtime ignores an
// unprivileged pod's own NVIDIA_VISIBLE_DEVICES (EnvDeviceRequestsRefused). Otherwise a
// container that asks for no GPU memory, running an image that sets the variable (NVIDIA's
// CUDA images set it to all; admission cannot see an image's env), is given every card of
// the node by the runtime, outside any limit or MPS daemon. Accepted, unknown (a missing or
// unreadable file) and path "" (not read) all block: fail closed. The error names the file
// and the key to set.
func IsolationBlocker(path string) error {
	if path == "" {
		return ErrNotRead
	}
	return Check(path).IsolationBlocker()
}

// IsolationBlocker is the package function for a verdict already read.
func (v Verdict) IsolationBlocker() error {
	if v.State == gpushare.EnvDeviceRequestsRefused {
		return nil
	}
	return fmt.Errorf("%s=%s: %s; a container that asks for no GPU memory could reach every card of the node with no limit: set %s = false in the NVIDIA container runtime's config.toml",
		gpushare.LabelEnvDeviceRequests, v.State, v.Reason, acceptEnvvarKey)
}

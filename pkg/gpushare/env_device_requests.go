package gpushare

import "fmt"

// LabelEnvDeviceRequests is the node label share-plugin sets from the node's NVIDIA
// container runtime configuration: whether the runtime honours device requests that an
// unprivileged container makes in its own environment (NVIDIA_VISIBLE_DEVICES), so that a
// pod's spec can widen the cards Allocate handed it. Values: EnvDeviceRequests.
const LabelEnvDeviceRequests = "gpushare.io/env-device-requests"

// EnvDeviceRequests is the value of LabelEnvDeviceRequests.
type EnvDeviceRequests string

const (
	// EnvDeviceRequestsAccepted: the runtime honours them
	// (accept-nvidia-visible-devices-envvar-when-unprivileged is true or, its default, not
	// set): a tenant can reach every card of the node.
	EnvDeviceRequestsAccepted EnvDeviceRequests = "accepted"
	// EnvDeviceRequestsRefused: the runtime ignores them for unprivileged containers.
	EnvDeviceRequestsRefused EnvDeviceRequests = "refused"
	// EnvDeviceRequestsUnknown: share-plugin found no configuration to read (simulated
	// GPUs, no NVIDIA container toolkit, a configuration elsewhere) or could not parse it.
	EnvDeviceRequestsUnknown EnvDeviceRequests = "unknown"
)

// EventEnvDeviceRequestsAccepted is the reason of the Warning event share-plugin sends on
// its node when the node's NVIDIA runtime honours a pod's own device requests, or when its
// configuration cannot be parsed (then assumed to).
const EventEnvDeviceRequestsAccepted = "GPUShareEnvDeviceRequestsAccepted"

// ParseEnvDeviceRequests reads a LabelEnvDeviceRequests value. Errors: any value but the
// three, naming the label and the accepted values.
func ParseEnvDeviceRequests(v string) (EnvDeviceRequests, error) {
	switch e := EnvDeviceRequests(v); e {
	case EnvDeviceRequestsAccepted, EnvDeviceRequestsRefused, EnvDeviceRequestsUnknown:
		return e, nil
	}
	return "", fmt.Errorf("node label %s=%q: want %s, %s or %s", LabelEnvDeviceRequests, v,
		EnvDeviceRequestsAccepted, EnvDeviceRequestsRefused, EnvDeviceRequestsUnknown)
}

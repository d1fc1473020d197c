package deviceplugin

import (
	"fmt"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// DeviceListStrategy is how Allocate hands the chosen cards to the container runtime, as
// NVIDIA's device plugin names the same choice.
type DeviceListStrategy string

const (
	// DeviceListEnvVar sets NVIDIA_VISIBLE_DEVICES to the cards' UUIDs. The NVIDIA container
	// runtime must honour that variable for unprivileged containers, which also lets any pod
	// of the node set it itself and ask for every GPU.
	DeviceListEnvVar DeviceListStrategy = "envvar"
	// DeviceListCDICRI names the cards as CDI devices (<CDIKind>=<UUID>) in the response's
	// CDIDevices, which kubelet (1.28 or later) passes to the runtime through the CRI; the
	// runtime injects them from the node's CDI spec (e.g. `nvidia-ctk cdi generate`) and
	// need not trust environment variables. NVIDIA_VISIBLE_DEVICES is not set.
	DeviceListCDICRI DeviceListStrategy = "cdi-cri"
)

// DefaultCDIKind is the CDI vendor/class of NVIDIA's CDI spec, whose devices are named by
// card UUID among others.
const DefaultCDIKind = "nvidia.com/gpu"

// ParseDeviceListStrategy reads a --device-list-strategy value. Errors: anything but
// envvar or cdi-cri.
func ParseDeviceListStrategy(s string) (DeviceListStrategy, error) {
	switch d := DeviceListStrategy(s); d {
	case DeviceListEnvVar, DeviceListCDICRI:
		return d, nil
	}
	return "", fmt.Errorf("device list strategy %q: want %s or %s", s, DeviceListEnvVar, DeviceListCDICRI)
}

// handOver is the container's answer: env (containerEnv's) and, per the strategy, the
// cards as NVIDIA_VISIBLE_DEVICES or as CDI devices.
func (p *Plugin) handOver(env map[string]string, cards []gpushare.Device) *pluginapi.ContainerAllocateResponse {
	resp := &pluginapi.ContainerAllocateResponse{Envs: env}
	if p.cfg.DeviceListStrategy != DeviceListCDICRI {
		return resp
	}
	delete(env, gpushare.EnvVisibleDevices)
	for _, c := range cards {
		resp.CdiDevices = append(resp.CdiDevices, &pluginapi.CDIDevice{Name: p.cfg.CDIKind + "=" + c.UUID})
	}
	return resp
}

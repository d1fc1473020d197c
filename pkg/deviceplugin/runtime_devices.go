package deviceplugin

import (
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/nodecards"
)

// What the last cdi-allocation answer found in the runtime's CDI registry
// (Plugin.runtimeDevicesSeen), so that a change is logged once, not on every Allocate.
const (
	runtimeDevicesUnknown int32 = iota
	runtimeDevicesFound
	runtimeDevicesMissing
)

// registryDirs are the CDI spec folders the runtime reads that share-plugin may see:
// CDIRegistryDirs when set, else nodecards.RegistryDirs of CDISpecDir.
func (p *Plugin) registryDirs() []string {
	if p.cfg.CDIRegistryDirs != nil {
		return p.cfg.CDIRegistryDirs
	}
	return nodecards.RegistryDirs(p.cfg.CDISpecDir)
}

// logRuntimeDevices says, once per change, whether the cards came with the runtime's own CDI
// devices or the allocation spec alone hands them over (device nodes, no driver libraries
// where the runtime ignores NVIDIA_VISIBLE_DEVICES).
func (p *Plugin) logRuntimeDevices(dirs []string, missing []gpushare.Device) {
	state := runtimeDevicesFound
	if len(missing) > 0 {
		state = runtimeDevicesMissing
	}
	if p.runtimeDevicesSeen.Swap(state) == state {
		return
	}
	if state == runtimeDevicesFound {
		klog.InfoS("The runtime's CDI registry has a device per card; cdi-allocation hands those over before the allocation's own device", "kind", p.cfg.CDIKind, "dirs", dirs)
		return
	}
	uuids := make([]string, len(missing))
	for i, c := range missing {
		uuids[i] = c.UUID
	}
	klog.InfoS("No CDI device <kind>=<UUID> for these cards in the runtime's CDI registry: the allocation's spec alone hands them over, with their device nodes but not the driver's libraries (generate NVIDIA's spec with nvidia-ctk cdi generate --device-name-strategy=uuid)",
		"kind", p.cfg.CDIKind, "cards", uuids, "dirs", dirs)
}

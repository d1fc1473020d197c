package deviceplugin

import (
	"k8s.io/klog/v2"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// What the last cdi-allocation answer found in the runtime's CDI registry
// (Plugin.runtimeDevicesSeen), so that a change is logged once, not on every Allocate.
const (
	runtimeDevicesUnknown int32 = iota
	runtimeDevicesFound
	runtimeDevicesMissing
)

// registryDirs are the CDI spec folders the runtime reads that share-plugin may see:
// CDISpecDir, then the CDI library's defaults (/etc/cdi, /var/run/cdi), the folders
// containerd and CRI-O read unless configured otherwise. A folder share-plugin does not
// see (not mounted) is simply empty to the registry.
func (p *Plugin) registryDirs() []string {
	if p.cfg.CDIRegistryDirs != nil {
		return p.cfg.CDIRegistryDirs
	}
	return RegistryDirs(p.cfg.CDISpecDir)
}

// runtimeCardDevices splits cards by whether the runtime's CDI registry (dirs, read with the
// CDI library's own cache, as runtimes read it) holds the device <kind>=<UUID> of the card:
// NVIDIA's spec generated with `nvidia-ctk cdi generate --device-name-strategy=uuid`, whose
// devices and spec-wide edits bring the driver's libraries, hooks and device nodes, or the
// simulated cards' spec (WriteSimulatedCDISpec). Returns the qualified names of the devices
// found, in the cards' order, and the cards without one. Specs that do not parse are
// skipped, as the runtime skips them.
func runtimeCardDevices(dirs []string, kind string, cards []gpushare.Device) (found []string, missing []gpushare.Device) {
	cache, _ := cdiapi.NewCache(cdiapi.WithSpecDirs(dirs...), cdiapi.WithAutoRefresh(false))
	for _, c := range cards {
		name := kind + "=" + c.UUID
		if cache.GetDevice(name) != nil {
			found = append(found, name)
			continue
		}
		missing = append(missing, c)
	}
	return found, missing
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

package nodecards

import (
	"slices"

	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// RegistryDirs are the CDI spec folders a runtime reads that a plugin writing its specs
// into specDir may see: specDir, then the CDI library's defaults (/etc/cdi, /var/run/cdi),
// the folders containerd and CRI-O read unless configured otherwise. A folder the plugin
// does not see (not mounted) is simply empty to the registry.
func RegistryDirs(specDir string) []string {
	dirs := []string{specDir}
	for _, d := range cdiapi.DefaultSpecDirs {
		if !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// RuntimeCardDevices splits cards by whether the runtime's CDI registry (dirs, read with the
// CDI library's own cache, as runtimes read it) holds the device <kind>=<UUID> of the card:
// NVIDIA's spec generated with `nvidia-ctk cdi generate --device-name-strategy=uuid`, whose
// devices and spec-wide edits bring the driver's libraries, hooks and device nodes, or the
// simulated cards' spec (WriteSimulatedCDISpec). Returns the qualified names of the devices
// found, in the cards' order, and the cards without one, whose device nodes the caller's
// own spec must give. Specs that do not parse are skipped, as the runtime skips them.
func RuntimeCardDevices(dirs []string, kind string, cards []gpushare.Device) (found []string, missing []gpushare.Device) {
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

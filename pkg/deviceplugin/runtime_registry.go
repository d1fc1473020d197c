package deviceplugin

import (
	"slices"

	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// RegistryDirs are the CDI spec folders a runtime reads that a plugin writing its specs
// into specDir may see: specDir, then the CDI library's defaults (/etc/cdi, /var/run/cdi),
// the folders containerd and CRI-O read unless configured otherwise.
func RegistryDirs(specDir string) []string {
	dirs := []string{specDir}
	for _, d := range cdiapi.DefaultSpecDirs {
		if !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// RuntimeCardDevices splits cards by whether the runtime's CDI registry in dirs holds the
// device <kind>=<UUID> of the card (NVIDIA's spec with UUID names, or the simulated cards'
// spec), as the cdi-allocation path does: the qualified names found, in the cards' order,
// and the cards without one, whose device nodes the caller's own spec must give.
func RuntimeCardDevices(dirs []string, kind string, cards []gpushare.Device) (found []string, missing []gpushare.Device) {
	return runtimeCardDevices(dirs, kind, cards)
}

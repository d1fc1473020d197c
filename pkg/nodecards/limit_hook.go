package nodecards

import (
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	cdi "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/limithook"
)

// LimitHook is the createRuntime hook that holds a container to units[i] units of unit on
// cards[i]: gpushare-limit-hook at path with each card's UUID and limit in MiB, in NVML mode,
// or, when simulatedCardDir is set, recording the limits beside the simulated cards' files.
// createRuntime, not createContainer: runc runs the latter inside the container's PID and
// cgroup namespaces, where the host's cgroup path of the container cannot be found.
func LimitHook(path, simulatedCardDir string, unit gpushare.Unit, cards []gpushare.Device, units []int64) *cdi.Hook {
	limits := make([]limithook.Limit, len(cards))
	for i, c := range cards {
		limits[i] = limithook.Limit{UUID: c.UUID, MiB: units[i] * unit.MiB}
	}
	mode := limithook.ModeNVML
	if simulatedCardDir != "" {
		mode = limithook.ModeSimulated
	}
	return &cdi.Hook{
		HookName: cdiapi.CreateRuntimeHook,
		Path:     path,
		Args:     limithook.FormatArgs(path, mode, simulatedCardDir, limits),
	}
}

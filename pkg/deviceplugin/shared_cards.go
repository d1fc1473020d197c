package deviceplugin

import (
	"context"
	"time"

	"k8s.io/utils/clock"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	cdi "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/limithook"
	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

// BuildCards is the node's cards as the device plugin counts them, for the DRA back end:
// NVML's devices in index order, each with its whole units of unit. Errors: no card, a
// repeated index or UUID, or a card smaller than one unit.
func BuildCards(devs []gpunvml.Device, unit gpushare.Unit) ([]gpushare.Device, error) {
	return buildCards(devs, unit)
}

// CardHealth is the device plugin's card health for the DRA back end: a critical fault
// makes a card unhealthy until no fault was seen for the quiet period.
type CardHealth struct{ h *health }

// NewCardHealth tracks cards, all healthy at first.
func NewCardHealth(clk clock.Clock, quiet time.Duration, cards []gpushare.Device) *CardHealth {
	return &CardHealth{h: newHealth(clk, quiet, cards)}
}

// Healthy reports whether the card with uuid takes new work.
func (c *CardHealth) Healthy(uuid string) bool { return c.h.Healthy(uuid) }

// Changed returns a channel closed at the next change of any card's health.
func (c *CardHealth) Changed() <-chan struct{} { return c.h.changed.Wait() }

// Run applies faults and recoveries until ctx is done.
func (c *CardHealth) Run(ctx context.Context, faults <-chan gpunvml.Fault) { c.h.run(ctx, faults) }

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

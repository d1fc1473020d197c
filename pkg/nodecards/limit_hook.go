package nodecards

import (
	"strconv"

	"k8s.io/apimachinery/pkg/types"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	cdi "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/limithook"
)

// LimitHookConfig is where gpushare-limit-hook and its folders are on the host.
type LimitHookConfig struct {
	// Path is the hook's path.
	Path string
	// SimulatedCardDir, set for simulated cards, is the folder of their files: the hook then
	// records each limit beside the card's file instead of asking NVML.
	SimulatedCardDir string
	// FailureDir is where the hook leaves a record of each failure, which
	// LimitHookFailures counts; empty: no records.
	FailureDir string
}

// PodGrant is the pod a limit hook's spec is written for, and what the pod holds: Units[i]
// units on Cards[i], summed over all its containers (device plugin) or claims (DRA).
type PodGrant struct {
	UID   types.UID
	Cards []gpushare.Device
	Units []int64
	// Limits[i] is the most the pod may allocate on Cards[i], in units: its containers'
	// memory limits (gpushare.AnnotationMemLimit) summed as Units are; nil, or an entry
	// below Units[i]: Units[i].
	Limits []int64
}

// LimitHook is the createRuntime hook that holds a container to units[i] units of unit on
// cards[i], and its pod, pod.UID, to pod.Units[i] units on pod.Cards[i]: gpushare-limit-hook
// at c.Path with each card's UUID and limit in MiB (--pod-uid and --pod-limit for the pod), in
// NVML mode, or, when c.SimulatedCardDir is set, recording the limits beside the simulated
// cards' files. The hook refuses a container of another pod than pod.UID. Where limits[i]
// (the container's memory limit on cards[i]) or pod.Limits[i] is above the grant, that is the
// hard limit and the grant the soft one; nil limits: the grant is both.
//
// createRuntime, not createContainer: runc runs the latter inside the container's PID and
// cgroup namespaces, where the host's cgroup path of the container cannot be found.
//
// The hook's own --deadline (limithook.DefaultDeadline) and the entry's timeout in seconds
// (limithook.RuntimeTimeoutSeconds of it, after which the runtime kills the hook) come from
// the one deadline here, so the hook always gives up, and says why, before it is killed.
func LimitHook(c LimitHookConfig, unit gpushare.Unit, cards []gpushare.Device, units, limits []int64, pod PodGrant) *cdi.Hook {
	mode := limithook.ModeNVML
	if c.SimulatedCardDir != "" {
		mode = limithook.ModeSimulated
	}
	deadline := limithook.DefaultDeadline
	timeout := limithook.RuntimeTimeoutSeconds(deadline)
	return &cdi.Hook{
		HookName: cdiapi.CreateRuntimeHook,
		Path:     c.Path,
		Args: limithook.FormatArgs(c.Path, limithook.Args{
			Mode: mode, SimulatedCardDir: c.SimulatedCardDir, Deadline: deadline, FailureDir: c.FailureDir, Limits: limitsMiB(unit, cards, units, limits),
			PodUID: string(pod.UID), PodLimits: limitsMiB(unit, pod.Cards, pod.Units, pod.Limits),
		}),
		Timeout: &timeout,
	}
}

// limitsMiB is units[i] units of unit on cards[i], in MiB, card by card, as both soft and
// hard limit, or as the soft limit under a hard limit of hard[i] units where that is larger.
func limitsMiB(unit gpushare.Unit, cards []gpushare.Device, units, hard []int64) []limithook.Limit {
	limits := make([]limithook.Limit, len(cards))
	for i, card := range cards {
		limits[i] = limithook.Limit{UUID: card.UUID, MiB: units[i] * unit.MiB}
		if i < len(hard) && hard[i] > units[i] {
			limits[i].SoftMiB, limits[i].MiB = units[i]*unit.MiB, hard[i]*unit.MiB
		}
	}
	return limits
}

// ToolkitHookConfig is where NVIDIA's container toolkit hook is on the host, for
// ToolkitLimitHooks.
type ToolkitHookConfig struct {
	// Path is nvidia-cdi-hook's host path (share-plugin's --nvidia-cdi-hook-path).
	Path string
	// DriverRoot is the driver's root on the host, passed as the hook's --driver-root ("/"
	// for a driver installed on the host, /run/nvidia/driver under NVIDIA's GPU Operator).
	DriverRoot string
}

// ToolkitLimitHooks hands a container's limits to NVIDIA's container toolkit instead of
// gpushare-limit-hook: one createRuntime hook per card, `<c.Path> apply-cuda-memory-limits
// --driver-root <c.DriverRoot> --gpu-id <UUID>`, as the toolkit's own CDI specs name it, and
// the environment it reads the limits from: requestUnits units of unit per card as soft
// limit and limitUnits (at least requestUnits) as hard limit, in MiB, under both spellings of
// gpushare's EnvToolkitMem* names. The toolkit's hook limits the container's cgroup only: no
// pod-level limit goes with it.
func ToolkitLimitHooks(c ToolkitHookConfig, unit gpushare.Unit, cards []gpushare.Device, requestUnits, limitUnits int64) ([]*cdi.Hook, map[string]string) {
	limitUnits = max(limitUnits, requestUnits)
	timeout := limithook.RuntimeTimeoutSeconds(limithook.DefaultDeadline)
	hooks := make([]*cdi.Hook, 0, len(cards))
	for _, card := range cards {
		hooks = append(hooks, &cdi.Hook{
			HookName: cdiapi.CreateRuntimeHook,
			Path:     c.Path,
			Args:     []string{"nvidia-cdi-hook", gpushare.ToolkitApplyLimitsHook, "--driver-root", c.DriverRoot, "--gpu-id", card.UUID},
			Timeout:  &timeout,
		})
	}
	req := strconv.FormatInt(requestUnits*unit.MiB, 10)
	lim := strconv.FormatInt(limitUnits*unit.MiB, 10)
	env := map[string]string{
		gpushare.EnvToolkitMemRequest: req, gpushare.EnvToolkitMemRequests: req,
		gpushare.EnvToolkitMemLimit: lim, gpushare.EnvToolkitMemLimits: lim,
	}
	return hooks, env
}

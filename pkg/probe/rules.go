package probe

import (
	"slices"
	"strings"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// checkCards: the container reaches exactly the cards it was granted (expect; 0 for the
// sibling container). Every way a card shows counts: NVIDIA_VISIBLE_DEVICES, the simulated
// cards' files, the device nodes and, with the driver, CUDA's own list, so a card reached by
// any path beyond the grant is NOT enforced. A granted container that sees no card cannot
// verify anything.
func checkCards(s Sight, devs []Device, expect int) Check {
	seen := seenCards(s, devs)
	n := max(len(seen), len(s.DeviceNodes))
	switch {
	case s.visibleAll():
		return check(CheckCards, VerdictNotEnforced, "%s=all: the runtime gives every card of the node", gpushare.EnvVisibleDevices)
	case n > expect:
		return check(CheckCards, VerdictNotEnforced, "sees %d card(s) (%s), granted %d", n, describeSeen(seen, s.DeviceNodes), expect)
	case n < expect:
		return check(CheckCards, VerdictCannotVerify, "granted %d card(s), sees %d", expect, n)
	case n == 0:
		return check(CheckCards, VerdictEnforced, "sees no card, granted none")
	}
	return check(CheckCards, VerdictEnforced, "sees %d card(s) (%s), granted %d", n, describeSeen(seen, s.DeviceNodes), expect)
}

// seenCards is the sorted union of the card UUIDs the environment, the simulated cards' files
// and the driver show.
func seenCards(s Sight, devs []Device) []string {
	all := append(append([]string(nil), s.VisibleUUIDs()...), s.SimulatedCards...)
	for _, d := range devs {
		all = append(all, d.UUID)
	}
	slices.Sort(all)
	return slices.Compact(all)
}

func describeSeen(uuids, nodes []string) string {
	return strings.Join(append(append([]string(nil), uuids...), nodes...), ", ")
}

// checkMPS, on a node that promises mps: every card's contexts go through MPS. Without the
// driver's word (no driver, or one before CU_DEVICE_ATTRIBUTE_MPS_ENABLED) the MPS variables
// share-plugin sets can only be seen, not proven: cannot verify; without them the container
// would not connect to the card's daemon: NOT enforced.
func checkMPS(s Sight, devs []Device) Check {
	state := mpsOf(devs)
	switch {
	case state == MPSYes:
		return check(CheckMPS, VerdictEnforced, "the driver runs the card's contexts through MPS")
	case state == MPSNo:
		return check(CheckMPS, VerdictNotEnforced, "the driver runs the card's contexts without MPS")
	case s.MPSPipeDir == "":
		return check(CheckMPS, VerdictNotEnforced, "no %s: the container does not reach the card's MPS daemon", gpushare.EnvMPSPipeDirectory)
	}
	return check(CheckMPS, VerdictCannotVerify, "%s=%s is set, the driver cannot say whether MPS is used", gpushare.EnvMPSPipeDirectory, s.MPSPipeDir)
}

// mpsOf is the MPS state of all devs: yes or no when they agree, otherwise (or with none)
// unknown; one card without MPS among cards with it is no.
func mpsOf(devs []Device) MPSState {
	if len(devs) == 0 {
		return MPSUnknown
	}
	state := devs[0].MPS
	for _, d := range devs[1:] {
		if d.MPS != state {
			if d.MPS == MPSNo || state == MPSNo {
				return MPSNo
			}
			return MPSUnknown
		}
	}
	return state
}

// judgeMemory turns one card's Measurement into a verdict for a node that promises a limit
// (mps or limit) of grantMiB: reaching a unit beyond the grant is NOT enforced; a refusal
// below that is enforced when the card had room for more (or the driver reports the limit
// as the card's size), and cannot verify when the card itself was nearly full.
func judgeMemory(m Measurement, grantMiB, unitMiB int64) Check {
	switch {
	case m.Err != "":
		return check(CheckMemory, VerdictCannotVerify, "%s: %s", m.UUID, m.Err)
	case m.AllocatedMiB >= grantMiB+unitMiB:
		return check(CheckMemory, VerdictNotEnforced, "%s: allocated %d MiB, grant %d MiB", m.UUID, m.AllocatedMiB, grantMiB)
	case !m.OutOfMemory:
		return check(CheckMemory, VerdictCannotVerify, "%s: stopped at %d MiB without a refusal (bound %d MiB)", m.UUID, m.AllocatedMiB, m.BoundMiB)
	case m.FreeMiB >= m.AllocatedMiB+unitMiB || m.TotalMiB <= grantMiB+unitMiB:
		return check(CheckMemory, VerdictEnforced, "%s: refused beyond %d MiB, grant %d MiB (driver: %d MiB free of %d)", m.UUID, m.AllocatedMiB, grantMiB, m.FreeMiB, m.TotalMiB)
	}
	return check(CheckMemory, VerdictCannotVerify, "%s: refused beyond %d MiB with only %d MiB free: the card may be full", m.UUID, m.AllocatedMiB, m.FreeMiB)
}

package dra

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// unitMiB is u's size in MiB; the zero Unit is GiB, as everywhere else.
func unitMiB(u gpushare.Unit) int64 {
	if u.MiB <= 0 {
		return gpushare.GiB.MiB
	}
	return u.MiB
}

// checkUnitChange refuses to start with a unit other than the one the checkpoint's claims
// count in (recordedMiB, MiB per unit; 0: the checkpoint does not record it). Their units
// are counts of the old unit: read in the new one, a claim of 4096 MiB units would be
// limited to 4096 GiB, and a claim of 12 GiB units would count as 12 MiB, so the node would
// hand out again memory its pods hold. A checkpoint that records no unit could count in
// either, so its claims are refused too; a checkpoint without claims holds nothing to
// misread. The error names the claims and says to drain the node.
func checkUnitChange(node string, unit gpushare.Unit, path string, recordedMiB int64, claims map[types.UID]PreparedClaim) error {
	if len(claims) == 0 || recordedMiB == unitMiB(unit) {
		return nil
	}
	names := make([]string, 0, len(claims))
	for _, p := range claims {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	slices.Sort(names)
	drain := fmt.Sprintf("drain the node first (kubectl drain %s --ignore-daemonsets)", node)
	if recordedMiB == 0 {
		// No unit to go back to: only draining tells for certain.
		return fmt.Errorf("--memory-unit=%s but claims %s on this node were prepared in a unit checkpoint %s does not record: %s",
			unit, strings.Join(names, ", "), path, drain)
	}
	return fmt.Errorf("--memory-unit=%s but claims %s on this node were prepared in %s: %s, or start with the unit they were prepared in",
		unit, strings.Join(names, ", "), gpushare.Unit{MiB: recordedMiB}, drain)
}

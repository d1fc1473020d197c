package replay

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// UnitMode says how trace GPU-milli become gpu-mem units.
type UnitMode string

const (
	// UnitMilli: 1000 units per card whatever the model, and a pod asks for gpu_milli units
	// per card. Exact: the cluster accounts in the trace's own unit.
	UnitMilli UnitMode = "milli"
	// UnitGiB: a card has its model's memory in GiB (modelMemoryMiB), and a pod asks per card
	// for gpu_milli/1000 of the smallest card it may use, rounded up. Approximate: a pod
	// placed on a bigger card leaves more free than the trace would.
	UnitGiB UnitMode = "gib"
)

// modelMemoryMiB is card memory per trace model, from the FGD simulator's
// MapGpuTypeMemoryMiB (pkg/type/open-gpu-share/utils/const.go). G2 and G3 are undisclosed
// models; the simulator's placeholders are kept.
var modelMemoryMiB = map[string]int64{
	"A10":     22731,
	"G2":      20000,
	"G3":      30000,
	"P100":    16280,
	"T4":      15109,
	"V100M16": 16160,
	"V100M32": 32510,
}

// Units converts trace quantities into gpu-mem units for one cluster.
type Units struct {
	mode UnitMode
	// cardUnits is, in GiB mode, the units of one card of each model in the cluster.
	cardUnits map[string]int64
}

// newUnits checks mode ("milli" or "gib") against the cluster's models: in GiB mode every
// model must have a known memory size.
func newUnits(mode UnitMode, nodes []NodeSpec) (Units, error) {
	u := Units{mode: mode, cardUnits: map[string]int64{}}
	switch mode {
	case UnitMilli:
	case UnitGiB:
		for _, n := range nodes {
			if n.GPUs == 0 {
				continue
			}
			mib, ok := modelMemoryMiB[n.Model]
			if !ok {
				return Units{}, fmt.Errorf("unit gib: node %s has model %q of unknown memory (known: %s)",
					n.Name, n.Model, strings.Join(knownModels(), ", "))
			}
			u.cardUnits[n.Model] = gpushare.GiB.UnitsOf(mib)
		}
	default:
		return Units{}, fmt.Errorf("unit %q: want %q or %q", mode, UnitMilli, UnitGiB)
	}
	return u, nil
}

func knownModels() []string {
	out := make([]string, 0, len(modelMemoryMiB))
	for m := range modelMemoryMiB {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// Mode returns the unit mode.
func (u Units) Mode() UnitMode { return u.mode }

// CardUnits is the gpu-mem units of one card of the model.
func (u Units) CardUnits(model string) int64 {
	if u.mode == UnitGiB {
		return u.cardUnits[model]
	}
	return 1000
}

// Unit is the size of one unit on a card of the model, for the node inventory: GiB, or in
// milli mode a thousandth of the model's memory (at least 1 MiB), which only inspect reads.
func (u Units) Unit(model string) gpushare.Unit {
	if u.mode == UnitGiB {
		return gpushare.GiB
	}
	if mib := modelMemoryMiB[model]; mib >= 1000 {
		return gpushare.Unit{MiB: mib / 1000}
	}
	return gpushare.Unit{MiB: 1}
}

// PodUnitsPerCard is the units the pod asks for on each of its cards (0 for CPU-only pods).
func (u Units) PodUnitsPerCard(p PodSpec) int64 {
	if p.NumGPU == 0 {
		return 0
	}
	if u.mode != UnitGiB {
		return p.GPUMilli
	}
	var smallest int64
	for model, units := range u.cardUnits {
		if p.AllowsModel(model) && (smallest == 0 || units < smallest) {
			smallest = units
		}
	}
	if smallest == 0 { // no allowed model in the cluster: the pod fits nowhere anyway
		for _, units := range u.cardUnits {
			if smallest == 0 || units < smallest {
				smallest = units
			}
		}
	}
	return (p.GPUMilli*smallest + 999) / 1000
}

package policy

// Capacity is what the nodes a workload runs on offer in all: Units, the card units of their
// healthy cards, and Host, their allocatable CPU (millicores) and memory (MiB). The zero
// value is a capacity not known.
type Capacity struct {
	Units int64
	Host  Host
}

// The host pressure at which fgd's host cap moves from the typical pod's requests to each
// shape's own (fgd.ownShare): at or below pressureLow every shape is fed at the workload's
// average CPU and memory per card unit, at or above pressureHigh at its own, in proportion
// between. Offline (openb, seeds 42–44), ramps starting anywhere in 0.8–0.9 and ending in
// 0.95–1.1 leave the same GPU share unallocated within the spread between seeds; the
// families that need the shapes' own requests reach 1.0 (cpu235) and 1.14 (cpu300), the
// others 0.73–0.93 (docs/benchmarks-replay.md).
const (
	pressureLow  = 0.8
	pressureHigh = 1.0
)

// pressure is the share of c's CPU or memory, the larger, that w asks for by the time its
// pods fill every card unit of c: w's CPU (memory) request per card unit requested, all
// shapes by weight (pods without gpu-mem included), times c.Units, over c's CPU (memory).
// ok is false where that is not known: c or w without card units, or c without CPU and
// memory.
func (w Workload) pressure(c Capacity) (p float64, ok bool) {
	var cpu, mem, units float64
	for _, s := range w {
		cpu += s.Weight * float64(s.Host.CPUMilli)
		mem += s.Weight * float64(s.Host.MemoryMiB)
		units += s.Weight * float64(s.Cards) * float64(s.PerCard)
	}
	if units <= 0 || c.Units <= 0 || (c.Host.CPUMilli <= 0 && c.Host.MemoryMiB <= 0) {
		return 0, false
	}
	perUnit := float64(c.Units) / units
	if c.Host.CPUMilli > 0 {
		p = cpu * perUnit / float64(c.Host.CPUMilli)
	}
	if c.Host.MemoryMiB > 0 {
		p = max(p, mem*perUnit/float64(c.Host.MemoryMiB))
	}
	return p, true
}

// ownShare is how much each shape's own requests count in fgd's host cap against the
// workload's average (0..1) at pressure p (pressureLow, pressureHigh); 1 where the pressure
// is not known, the rule that needs no capacity.
func ownShare(p float64, ok bool) float64 {
	if !ok {
		return 1
	}
	return min(max((p-pressureLow)/(pressureHigh-pressureLow), 0), 1)
}

// perUnit is the workload's average CPU (millicores) and memory (MiB) request per card
// unit over its gpu-mem shapes, by weight; zero where it has none or they request nothing.
func (w Workload) perUnit() (cpu, mem float64) {
	var units float64
	for _, s := range w {
		if s.Cards == 0 {
			continue
		}
		cpu += s.Weight * float64(s.Host.CPUMilli)
		mem += s.Weight * float64(s.Host.MemoryMiB)
		units += s.Weight * float64(s.Cards) * float64(s.PerCard)
	}
	if units <= 0 {
		return 0, 0
	}
	return cpu / units, mem / units
}

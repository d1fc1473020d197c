package policy

// Capacity is what the nodes a workload runs on offer in all: Units, the card units of their
// healthy cards, and Host, their allocatable CPU (millicores) and memory (MiB). The zero
// value is a capacity not known.
type Capacity struct {
	Units int64
	Host  Host
}

// The host pressure at which fgd's host cap moves from the typical pod's requests to each
// shape's own (ownShare): at or below pressureLow every shape is fed at the workload's
// average CPU and memory per card unit, at or above pressureHigh at its own, in proportion
// between. The ramp lies in the gap between the workloads whose pods ask for all of the
// cluster's CPU or memory by the time the cards fill (pressure 1 and above: they need each
// shape's own requests) and the others (below it); where exactly in that gap it starts and
// ends does not change the result beyond the spread between seeds
// (docs/design/benchmarks-replay.md).
const (
	pressureLow  = 0.8
	pressureHigh = 1.0
)

// demand is a workload's requests, by weight: card units, and CPU (millicores) and memory
// (MiB) of its gpu-mem shapes and of all its shapes (pods without gpu-mem included).
type demand struct {
	units, gpuCPU, gpuMem, cpu, mem float64
}

func (w Workload) demand() demand {
	var d demand
	for _, s := range w {
		cpu, mem := s.Weight*float64(s.Host.CPUMilli), s.Weight*float64(s.Host.MemoryMiB)
		d.cpu += cpu
		d.mem += mem
		if s.Cards > 0 {
			d.gpuCPU += cpu
			d.gpuMem += mem
			d.units += s.Weight * float64(s.Cards) * float64(s.PerCard)
		}
	}
	return d
}

// pressure is the share of c's CPU or memory, the larger, that the workload d asks for by
// the time its pods fill every card unit of c: its CPU (memory) request per card unit
// requested, all shapes (pods without gpu-mem included), times c.Units, over c's CPU
// (memory). ok is false where that is not known: c or d without card units, or c without
// CPU and memory.
func (d demand) pressure(c Capacity) (p float64, ok bool) {
	if d.units <= 0 || c.Units <= 0 || (c.Host.CPUMilli <= 0 && c.Host.MemoryMiB <= 0) {
		return 0, false
	}
	perUnit := float64(c.Units) / d.units
	if c.Host.CPUMilli > 0 {
		p = d.cpu * perUnit / float64(c.Host.CPUMilli)
	}
	if c.Host.MemoryMiB > 0 {
		p = max(p, d.mem*perUnit/float64(c.Host.MemoryMiB))
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

// perUnit is the workload's average CPU (millicores) and memory (MiB) request per card unit
// over its gpu-mem shapes; zero where it has none.
func (d demand) perUnit() (cpu, mem float64) {
	if d.units <= 0 {
		return 0, 0
	}
	return d.gpuCPU / d.units, d.gpuMem / d.units
}

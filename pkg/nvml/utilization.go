package nvml

import (
	"maps"
	"slices"
)

// utilSample is one of NVML's per-process utilisation samples.
type utilSample struct {
	pid     uint32
	sm, mem uint32 // percent
}

// meanByPID folds the samples of a window into one entry per PID, in PID order: the mean of
// its SM and memory percentages, each sample capped at 100 (a driver answer above 100 is
// noise, not more than the card). The driver keeps one sample per process per sampling
// period it ran in, so the mean is over the periods the process was seen in.
func meanByPID(samples []utilSample) []ProcessUtilization {
	type sum struct{ sm, mem, n uint64 }
	by := map[uint32]*sum{}
	for _, s := range samples {
		a := by[s.pid]
		if a == nil {
			a = &sum{}
			by[s.pid] = a
		}
		a.sm += uint64(min(s.sm, 100))
		a.mem += uint64(min(s.mem, 100))
		a.n++
	}
	out := make([]ProcessUtilization, 0, len(by))
	for _, pid := range slices.Sorted(maps.Keys(by)) {
		a := by[pid]
		out = append(out, ProcessUtilization{PID: pid, SMPercent: uint32(a.sm / a.n), MemPercent: uint32(a.mem / a.n)})
	}
	return out
}

// simUtilizationOf is the utilisation of card index in the simulated processes file at path:
// one entry per PID whose entry sets smUtil, with that figure.
func simUtilizationOf(path string, devices []Device, index int) ([]ProcessUtilization, error) {
	list, err := readSimProcesses(path, devices)
	if err != nil {
		return nil, err
	}
	var samples []utilSample
	for _, p := range list {
		if p.SMUtil != nil && simCardIndex(p.Card, devices) == index {
			samples = append(samples, utilSample{pid: p.PID, sm: *p.SMUtil})
		}
	}
	return meanByPID(samples), nil
}

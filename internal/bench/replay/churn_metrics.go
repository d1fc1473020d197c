package replay

import (
	"math"
	"slices"
)

// ChurnMetrics sum up a churn replay. Percentages are of the cluster's GPU capacity;
// times are replay seconds. Time averages run over the arrival window, from the arrival of
// the pod at 1 % of the stream to the last arrival: before it the trace's first pods
// trickle in (the openb traces' first 1 % of pods span about three quarters of their
// time), after it the cluster only drains.
type ChurnMetrics struct {
	Pods   int `json:"pods"`
	Placed int `json:"placed"`
	// NeverPlaced: pods still waiting when no departure was left; NeverPlacedGPU: those
	// with a GPU request; NeverFit: those no empty node holds (a GPU model no node has, more
	// cards than any node).
	NeverPlaced    int `json:"never_placed"`
	NeverPlacedGPU int `json:"never_placed_gpu"`
	NeverFit       int `json:"never_fit"`
	// Waited: placed pods that waited at all.
	Waited int `json:"waited"`
	// PendingP50, PendingP99, PendingMax: pending time of the placed pods (nearest rank).
	PendingP50 float64 `json:"pending_p50_s"`
	PendingP99 float64 `json:"pending_p99_s"`
	PendingMax float64 `json:"pending_max_s"`
	// AllocatedMeanPct: allocated GPU share, time average.
	AllocatedMeanPct float64 `json:"allocated_mean_pct"`
	// AllocatedPeakPct: the highest allocated share.
	AllocatedPeakPct float64 `json:"allocated_peak_pct"`
	// WaitingTimePct: share of the window with a GPU pod waiting (one that an empty node
	// would hold: NeverFit pods do not count here nor in FreeWhileWaitingPct).
	WaitingTimePct float64 `json:"waiting_time_pct"`
	// FreeWhileWaitingPct: unallocated GPU share, time average over the part of the window
	// with a GPU pod waiting: GPU left free while pods that want GPU cannot use it
	// (fragmentation, or a request larger than any node's free cards). 0 when none waited.
	FreeWhileWaitingPct float64 `json:"free_while_waiting_pct"`
	// Window is the arrival window's length, End the last event's time.
	Window float64 `json:"window_s"`
	End    float64 `json:"end_s"`
}

// churnWindowStart is the share of the stream that arrives before the metrics' window.
const churnWindowStart = 0.01

// churnWindow returns the arrival window of stream (non-empty, arrival order).
func churnWindow(stream []ChurnPod) (first, last float64) {
	return stream[int(churnWindowStart*float64(len(stream)))].Arrive, stream[len(stream)-1].Arrive
}

// churnMetrics computes the metrics of r for a stream of pods pods, its window from first
// to last.
func churnMetrics(r churnResult, pods int, first, last float64) ChurnMetrics {
	m := ChurnMetrics{Pods: pods, Placed: len(r.Waits), NeverPlaced: r.NeverPlaced, NeverPlacedGPU: r.NeverPlacedGPU, NeverFit: r.NeverFit, Window: last - first}
	waits := slices.Clone(r.Waits)
	slices.Sort(waits)
	for _, w := range waits {
		if w > 0 {
			m.Waited++
		}
	}
	if len(waits) > 0 {
		m.PendingP50, m.PendingP99, m.PendingMax = nearestRank(waits, 50), nearestRank(waits, 99), waits[len(waits)-1]
	}
	pct := func(milli int64) float64 { return 100 * float64(milli) / float64(r.CapacityMilli) }
	var allocArea, waitTime, freeArea float64
	for i, s := range r.Samples {
		m.AllocatedPeakPct = math.Max(m.AllocatedPeakPct, pct(s.AllocatedMilli))
		m.End = s.Time
		// The sample holds from its time to the next sample's, clipped to the window.
		from, to := math.Max(s.Time, first), last
		if i+1 < len(r.Samples) {
			to = math.Min(r.Samples[i+1].Time, last)
		}
		if to <= from {
			continue
		}
		d := to - from
		allocArea += d * pct(s.AllocatedMilli)
		if s.PendingGPUMilli > 0 {
			waitTime += d
			freeArea += d * (100 - pct(s.AllocatedMilli))
		}
	}
	if m.Window > 0 {
		m.AllocatedMeanPct = allocArea / m.Window
		m.WaitingTimePct = 100 * waitTime / m.Window
	} else if k := len(r.Samples); k > 0 {
		m.AllocatedMeanPct = pct(r.Samples[k-1].AllocatedMilli)
	}
	if waitTime > 0 {
		m.FreeWhileWaitingPct = freeArea / waitTime
	}
	return m
}

// nearestRank is the p-th percentile of sorted values (non-empty), nearest-rank method.
func nearestRank(sorted []float64, p float64) float64 {
	k := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[max(k, 1)-1]
}

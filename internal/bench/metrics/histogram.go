package metrics

import (
	"math"
	"sort"

	dto "github.com/prometheus/client_model/go"
)

// Histogram is one Prometheus histogram summed over its label sets: cumulative counts per
// finite upper bound (seconds for the extender's *_duration_seconds), ascending. The +Inf
// bucket is Count.
type Histogram struct {
	Bounds []float64
	Cum    []float64
	Count  float64
	Sum    float64
}

// histogramOf sums the histogram samples of a metric family over its label sets.
func histogramOf(mf *dto.MetricFamily) Histogram {
	byBound := map[float64]float64{}
	var h Histogram
	for _, m := range mf.GetMetric() {
		ph := m.GetHistogram()
		if ph == nil {
			continue
		}
		h.Count += float64(ph.GetSampleCount())
		h.Sum += ph.GetSampleSum()
		for _, b := range ph.GetBucket() {
			if !math.IsInf(b.GetUpperBound(), 1) {
				byBound[b.GetUpperBound()] += float64(b.GetCumulativeCount())
			}
		}
	}
	for le := range byBound {
		h.Bounds = append(h.Bounds, le)
	}
	sort.Float64s(h.Bounds)
	for _, le := range h.Bounds {
		h.Cum = append(h.Cum, byBound[le])
	}
	return h
}

// Sub returns the observations made between before and h. Buckets are matched by bound,
// so a before that lacks some (the histogram was absent then) subtracts nothing for them.
func (h Histogram) Sub(before Histogram) Histogram {
	prev := make(map[float64]float64, len(before.Bounds))
	for i, le := range before.Bounds {
		prev[le] = before.Cum[i]
	}
	d := Histogram{Bounds: h.Bounds, Cum: make([]float64, len(h.Cum)), Count: h.Count - before.Count, Sum: h.Sum - before.Sum}
	for i, c := range h.Cum {
		d.Cum[i] = c - prev[h.Bounds[i]]
	}
	return d
}

// Quantile estimates the q-quantile (0..1) as Prometheus' histogram_quantile does: linear
// interpolation inside the bucket holding the rank; the highest finite bound when the rank
// lies above it. NaN without observations; Latency keeps NaN out of results.
func (h Histogram) Quantile(q float64) float64 {
	if h.Count <= 0 || len(h.Bounds) == 0 {
		return math.NaN()
	}
	rank := q * h.Count
	prevBound, prevCum := 0.0, 0.0
	for i, le := range h.Bounds {
		c := h.Cum[i]
		if c >= rank {
			if c == prevCum {
				return le
			}
			return prevBound + (le-prevBound)*(rank-prevCum)/(c-prevCum)
		}
		prevBound, prevCum = le, c
	}
	return prevBound
}

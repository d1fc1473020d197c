package metrics

import (
	"math"
	"slices"
	"time"
)

// Latency summarises the observations of one operation in milliseconds. Without
// observations only Count (0) is set, and the zero figures are left out of JSON: a
// quantile of nothing is NaN, which JSON cannot carry.
type Latency struct {
	Count  int64   `json:"count"`
	MeanMs float64 `json:"mean_ms,omitempty"`
	P50Ms  float64 `json:"p50_ms,omitempty"`
	P99Ms  float64 `json:"p99_ms,omitempty"`
}

// Between is the latency of the observations of histogram name made between the two
// scrapes; zero when after lacks the histogram. Quantiles are interpolated inside the
// buckets, as histogram_quantile does.
func Between(before, after Scrape, name string) Latency {
	a, ok := after.Hist[name]
	if !ok {
		return Latency{}
	}
	d := a.Sub(before.Hist[name])
	if d.Count <= 0 {
		return Latency{}
	}
	return Latency{
		Count:  int64(d.Count),
		MeanMs: d.Sum / d.Count * 1e3,
		P50Ms:  finite(d.Quantile(0.5)) * 1e3,
		P99Ms:  finite(d.Quantile(0.99)) * 1e3,
	}
}

// Of is the latency of measured durations, quantiles by nearest rank.
func Of(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	at := func(q float64) float64 {
		i := min(max(int(q*float64(len(sorted))+0.5)-1, 0), len(sorted)-1)
		return ms(sorted[i])
	}
	var sum time.Duration
	for _, d := range sorted {
		sum += d
	}
	return Latency{Count: int64(len(sorted)), MeanMs: ms(sum) / float64(len(sorted)), P50Ms: at(0.5), P99Ms: at(0.99)}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// finite maps NaN (a histogram with a count but no finite buckets) to 0.
func finite(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return v
}

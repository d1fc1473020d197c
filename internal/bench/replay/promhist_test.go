package replay

import (
	"math"
	"strings"
	"testing"
)

const scrapeBefore = `# HELP gpushare_filter_duration_seconds Latency of filter calls.
# TYPE gpushare_filter_duration_seconds histogram
gpushare_filter_duration_seconds_bucket{le="0.001"} 10
gpushare_filter_duration_seconds_bucket{le="0.002"} 10
gpushare_filter_duration_seconds_bucket{le="0.004"} 10
gpushare_filter_duration_seconds_bucket{le="+Inf"} 10
gpushare_filter_duration_seconds_sum 0.005
gpushare_filter_duration_seconds_count 10
gpushare_filter_rejections_total{reason="card_shortfall"} 3
go_gc_duration_seconds_count 7
`

// After: 100 more filter calls, 50 in (0, 1ms], 40 in (1ms, 2ms], 10 in (2ms, 4ms].
const scrapeAfter = `gpushare_filter_duration_seconds_bucket{le="0.001"} 60
gpushare_filter_duration_seconds_bucket{le="0.002"} 100
gpushare_filter_duration_seconds_bucket{le="0.004"} 110
gpushare_filter_duration_seconds_bucket{le="+Inf"} 110
gpushare_filter_duration_seconds_sum 0.155
gpushare_filter_duration_seconds_count 110
gpushare_bind_duration_seconds_bucket{verb="x",le="0.01"} 1
gpushare_bind_duration_seconds_bucket{verb="y",le="0.01"} 2
gpushare_bind_duration_seconds_bucket{verb="x",le="+Inf"} 2
gpushare_bind_duration_seconds_bucket{verb="y",le="+Inf"} 2
gpushare_bind_duration_seconds_count 4
`

func TestHistogramDiffQuantile(t *testing.T) {
	before, err := ParseHistograms(strings.NewReader(scrapeBefore), MetricFilter, MetricBind)
	if err != nil {
		t.Fatal(err)
	}
	after, err := ParseHistograms(strings.NewReader(scrapeAfter), MetricFilter, MetricBind)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := before["go_gc_duration_seconds"]; ok {
		t.Errorf("unrequested histogram kept")
	}
	d := after[MetricFilter].Sub(before[MetricFilter])
	if d.Count != 100 || math.Abs(d.Sum-0.15) > 1e-9 {
		t.Errorf("diff count %v sum %v, want 100, 0.15", d.Count, d.Sum)
	}
	tests := []struct {
		q, want float64
	}{
		{0.5, 0.001},   // rank 50 = end of the first bucket
		{0.25, 0.0005}, // rank 25: halfway into (0, 1ms]
		{0.7, 0.0015},  // rank 70: 20 of 40 into (1ms, 2ms]
		{0.99, 0.0038}, // rank 99: 9 of 10 into (2ms, 4ms]
		{1.0, 0.004},   // rank 100
	}
	for _, tc := range tests {
		if got := d.Quantile(tc.q); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("q%.2f = %v, want %v", tc.q, got, tc.want)
		}
	}
	// Label sets are summed: 3 of 4 binds within 10ms, the rest in +Inf → highest bound.
	b := after[MetricBind].Sub(nil)
	if got := b.Quantile(0.5); math.Abs(got-0.01*2/3) > 1e-9 {
		t.Errorf("bind p50 = %v, want %v", got, 0.01*2/3)
	}
	if got := b.Quantile(0.99); got != 0.01 {
		t.Errorf("bind p99 = %v, want 0.01 (rank in +Inf)", got)
	}
	if got := (&Histogram{Buckets: map[float64]float64{}}).Quantile(0.5); !math.IsNaN(got) {
		t.Errorf("empty histogram quantile = %v, want NaN", got)
	}
}

func TestParseHistogramsErrors(t *testing.T) {
	for _, in := range []string{
		"gpushare_filter_duration_seconds_bucket{le=\"0.1\"} abc\n",
		"gpushare_filter_duration_seconds_bucket{le=\"x\"} 1\n",
		"gpushare_filter_duration_seconds_bucket{quantile=\"0.1\"} 1\n",
		"gpushare_filter_duration_seconds_count\n",
	} {
		if _, err := ParseHistograms(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), "metrics line 1") {
			t.Errorf("%q: error = %v, want one naming line 1", in, err)
		}
	}
}

func TestSummaryLatencies(t *testing.T) {
	before, _ := ParseHistograms(strings.NewReader(scrapeBefore))
	after, _ := ParseHistograms(strings.NewReader(scrapeAfter))
	var s Summary
	s.SetLatencies(before, after)
	f := s.Latencies["filter"]
	if f.Count != 100 || math.Abs(f.P50ms-1) > 1e-6 || math.Abs(f.P99ms-3.8) > 1e-6 {
		t.Errorf("filter latency = %+v, want count 100, p50 1ms, p99 3.8ms", f)
	}
	if _, ok := s.Latencies["prioritize"]; ok {
		t.Errorf("prioritize latency without its histogram")
	}
	if !strings.Contains(s.Line(), "filter_p50=1.00ms filter_p99=3.80ms") {
		t.Errorf("line %q lacks the filter latencies", s.Line())
	}
}

package scale

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// exposition renders a filter histogram with cumulative counts at 1, 2, 4 ms and +Inf,
// two card gauges and a heap gauge, as the extender's /metrics does.
func exposition(c1, c2, c4, inf, sum float64) string {
	return fmt.Sprintf(`# HELP gpushare_filter_duration_seconds Latency of filter calls.
# TYPE gpushare_filter_duration_seconds histogram
gpushare_filter_duration_seconds_bucket{le="0.001"} %g
gpushare_filter_duration_seconds_bucket{le="0.002"} %g
gpushare_filter_duration_seconds_bucket{le="0.004"} %g
gpushare_filter_duration_seconds_bucket{le="+Inf"} %g
gpushare_filter_duration_seconds_sum %g
gpushare_filter_duration_seconds_count %g
# HELP gpushare_card_allocated_units units
# TYPE gpushare_card_allocated_units gauge
gpushare_card_allocated_units{card="0",node="a"} 8
gpushare_card_allocated_units{card="1",node="a"} 4
# HELP gpushare_bind_failures_total failures
# TYPE gpushare_bind_failures_total counter
gpushare_bind_failures_total{reason="no_fit"} 3
gpushare_bind_failures_total{reason="patch"} 1
# HELP go_memstats_heap_inuse_bytes heap
# TYPE go_memstats_heap_inuse_bytes gauge
go_memstats_heap_inuse_bytes 1.048576e+06
`, c1, c2, c4, inf, sum, inf)
}

func TestLatencyBetween(t *testing.T) {
	before, err := parseScrape(strings.NewReader(exposition(5, 5, 5, 5, 0.004)))
	if err != nil {
		t.Fatal(err)
	}
	// 100 new observations: 50 at ≤ 1 ms, 48 in (1, 2] ms, 2 in (2, 4] ms.
	after, err := parseScrape(strings.NewReader(exposition(55, 103, 105, 105, 0.004+0.1)))
	if err != nil {
		t.Fatal(err)
	}
	want := Latency{Count: 100, MeanMs: 1, P50Ms: 1, P99Ms: 3}
	got := latencyBetween(before, after, metricFilter)
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("latency (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(Latency{}, latencyBetween(before, after, metricBind)); diff != "" {
		t.Errorf("absent histogram (-want,+got):\n%s", diff)
	}
	if got := after.Gauges[gaugeAllocated]; got != 12 {
		t.Errorf("allocated units summed over cards = %g, want 12", got)
	}
	if got := after.Gauges[counterBindFailures]; got != 4 {
		t.Errorf("bind failures summed over reasons = %g, want 4", got)
	}
	if got := after.Gauges[gaugeHeapInuse]; got != 1<<20 {
		t.Errorf("heap in use = %g, want 1 MiB", got)
	}
}

func TestQuantile(t *testing.T) {
	h := Histogram{Bounds: []float64{1, 2, 4}, Cum: []float64{0, 10, 10}, Count: 12}
	tests := []struct {
		q, want float64
	}{
		{0.5, 1.6},   // rank 6 of 10 in (1, 2]
		{0.99, 4},    // rank 11.88 above the last finite bucket's count
		{0.05, 1.06}, // rank 0.6
	}
	for _, tc := range tests {
		if got := h.Quantile(tc.q); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("Quantile(%g) = %g, want %g", tc.q, got, tc.want)
		}
	}
	if got := (Histogram{}).Quantile(0.5); !math.IsNaN(got) {
		t.Errorf("empty histogram quantile = %g, want NaN", got)
	}
}

func TestParseScrapeRejectsGarbage(t *testing.T) {
	if _, err := parseScrape(strings.NewReader("gpushare_filter_duration_seconds_bucket{le=\"0.1\" 3\n")); err == nil {
		t.Errorf("malformed exposition accepted")
	}
}

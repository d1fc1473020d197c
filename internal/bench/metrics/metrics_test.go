package metrics

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// exposition renders a filter histogram with cumulative counts at 1, 2, 4 ms and +Inf, a
// bind histogram over two label sets, card gauges, a counter and a heap gauge, as the
// extender's /metrics does.
func exposition(c1, c2, c4, inf, sum float64) string {
	return fmt.Sprintf(`# HELP gpushare_filter_duration_seconds Latency of filter calls.
# TYPE gpushare_filter_duration_seconds histogram
gpushare_filter_duration_seconds_bucket{le="0.001"} %g
gpushare_filter_duration_seconds_bucket{le="0.002"} %g
gpushare_filter_duration_seconds_bucket{le="0.004"} %g
gpushare_filter_duration_seconds_bucket{le="+Inf"} %g
gpushare_filter_duration_seconds_sum %g
gpushare_filter_duration_seconds_count %g
# TYPE gpushare_bind_duration_seconds histogram
gpushare_bind_duration_seconds_bucket{verb="x",le="0.01"} 1
gpushare_bind_duration_seconds_bucket{verb="x",le="+Inf"} 2
gpushare_bind_duration_seconds_sum{verb="x"} 0.05
gpushare_bind_duration_seconds_count{verb="x"} 2
gpushare_bind_duration_seconds_bucket{verb="y",le="0.01"} 2
gpushare_bind_duration_seconds_bucket{verb="y",le="+Inf"} 2
gpushare_bind_duration_seconds_sum{verb="y"} 0.01
gpushare_bind_duration_seconds_count{verb="y"} 2
# TYPE gpushare_card_allocated_units gauge
gpushare_card_allocated_units{card="0",node="a"} 8
gpushare_card_allocated_units{card="1",node="a"} 4
# TYPE gpushare_bind_failures_total counter
gpushare_bind_failures_total{reason="no_fit"} 3
gpushare_bind_failures_total{reason="patch"} 1
# TYPE go_memstats_heap_inuse_bytes gauge
go_memstats_heap_inuse_bytes 1.048576e+06
`, c1, c2, c4, inf, sum, inf)
}

func parse(t *testing.T, text string) Scrape {
	t.Helper()
	s, err := Parse(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBetween(t *testing.T) {
	before := parse(t, exposition(5, 5, 5, 5, 0.004))
	// 100 new filter calls: 50 at ≤ 1 ms, 48 in (1, 2] ms, 2 in (2, 4] ms.
	after := parse(t, exposition(55, 103, 105, 105, 0.004+0.1))
	tests := []struct {
		name          string
		before, after Scrape
		metric        string
		want          Latency
	}{
		{"delta of two scrapes", before, after, FilterSeconds, Latency{Count: 100, MeanMs: 1, P50Ms: 1, P99Ms: 3}},
		{"no new observations", after, after, FilterSeconds, Latency{}},
		{"absent histogram", before, after, PrioritizeSeconds, Latency{}},
		// Label sets summed: 3 of 4 within 10 ms, the rest in +Inf: p99 is the highest bound.
		{"no before, label sets summed", Scrape{}, after, BindSeconds, Latency{Count: 4, MeanMs: 15, P50Ms: 10 * 2.0 / 3, P99Ms: 10}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Between(tc.before, tc.after, tc.metric)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("latency (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestParseValues(t *testing.T) {
	s := parse(t, exposition(1, 1, 1, 1, 0))
	want := map[string]float64{AllocatedUnits: 12, BindFailures: 4, HeapInuse: 1 << 20}
	if diff := cmp.Diff(want, s.Values); diff != "" {
		t.Errorf("values summed over label sets (-want,+got):\n%s", diff)
	}
}

func TestParseRejectsGarbage(t *testing.T) {
	for _, in := range []string{
		"gpushare_filter_duration_seconds_bucket{le=\"0.1\" 3\n",
		"gpushare_filter_duration_seconds_bucket{le=\"0.1\"} abc\n",
		"# TYPE h histogram\nh_bucket{le=\"x\"} 1\n",
	} {
		if _, err := Parse(strings.NewReader(in)); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func TestQuantile(t *testing.T) {
	h := Histogram{Bounds: []float64{1, 2, 4}, Cum: []float64{0, 10, 10}, Count: 12}
	tests := []struct {
		name string
		h    Histogram
		q    float64
		want float64 // NaN: no estimate
	}{
		{"inside a bucket", h, 0.5, 1.6},     // rank 6 of 10 in (1, 2]
		{"above the last bound", h, 0.99, 4}, // rank 11.88 beyond the finite buckets
		{"low rank", h, 0.05, 1.06},          // rank 0.6
		{"empty bucket at the rank", Histogram{Bounds: []float64{1, 2}, Cum: []float64{4, 4}, Count: 4}, 1, 1},
		{"empty histogram", Histogram{}, 0.5, math.NaN()},
		{"count without buckets", Histogram{Count: 3}, 0.5, math.NaN()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.h.Quantile(tc.q)
			if math.IsNaN(tc.want) != math.IsNaN(got) || (!math.IsNaN(got) && math.Abs(got-tc.want) > 1e-9) {
				t.Errorf("Quantile(%g) = %g, want %g", tc.q, got, tc.want)
			}
		})
	}
}

func TestSubMatchesBounds(t *testing.T) {
	after := Histogram{Bounds: []float64{1, 2}, Cum: []float64{5, 9}, Count: 10, Sum: 7}
	tests := []struct {
		name   string
		before Histogram
		want   Histogram
	}{
		{"same buckets", Histogram{Bounds: []float64{1, 2}, Cum: []float64{1, 2}, Count: 3, Sum: 1},
			Histogram{Bounds: []float64{1, 2}, Cum: []float64{4, 7}, Count: 7, Sum: 6}},
		{"histogram absent before", Histogram{}, after},
		{"bucket missing before", Histogram{Bounds: []float64{2}, Cum: []float64{2}, Count: 2},
			Histogram{Bounds: []float64{1, 2}, Cum: []float64{5, 7}, Count: 8, Sum: 7}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, after.Sub(tc.before)); diff != "" {
				t.Errorf("Sub (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestOf(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name string
		ds   []time.Duration
		want Latency
	}{
		{"none", nil, Latency{}},
		{"one", []time.Duration{3 * ms}, Latency{Count: 1, MeanMs: 3, P50Ms: 3, P99Ms: 3}},
		{"nearest rank, unsorted", []time.Duration{4 * ms, 1 * ms, 3 * ms, 2 * ms}, Latency{Count: 4, MeanMs: 2.5, P50Ms: 2, P99Ms: 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Of(tc.ds)); diff != "" {
				t.Errorf("Of (-want,+got):\n%s", diff)
			}
		})
	}
}

// An empty histogram must encode without quantiles: json.Marshal fails on NaN.
func TestLatencyJSON(t *testing.T) {
	empty := Between(Scrape{}, parse(t, exposition(0, 0, 0, 0, 0)), FilterSeconds)
	tests := []struct {
		name string
		l    Latency
		want string
	}{
		{"empty histogram", empty, `{"count":0}`},
		{"observations", Latency{Count: 2, MeanMs: 1.5, P50Ms: 1, P99Ms: 2}, `{"count":2,"mean_ms":1.5,"p50_ms":1,"p99_ms":2}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.l)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Errorf("JSON %s, want %s", b, tc.want)
			}
		})
	}
}

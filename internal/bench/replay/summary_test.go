package replay

import (
	"strings"
	"testing"

	"github.com/gpushare/gpushare/internal/bench/metrics"
)

func TestSummaryLatencies(t *testing.T) {
	const before = `# TYPE gpushare_filter_duration_seconds histogram
gpushare_filter_duration_seconds_bucket{le="0.001"} 10
gpushare_filter_duration_seconds_bucket{le="0.002"} 10
gpushare_filter_duration_seconds_bucket{le="0.004"} 10
gpushare_filter_duration_seconds_bucket{le="+Inf"} 10
gpushare_filter_duration_seconds_sum 0.005
gpushare_filter_duration_seconds_count 10
`
	// 100 more filter calls: 50 in (0, 1ms], 40 in (1ms, 2ms], 10 in (2ms, 4ms]; a bind
	// histogram without observations.
	const after = `# TYPE gpushare_filter_duration_seconds histogram
gpushare_filter_duration_seconds_bucket{le="0.001"} 60
gpushare_filter_duration_seconds_bucket{le="0.002"} 100
gpushare_filter_duration_seconds_bucket{le="0.004"} 110
gpushare_filter_duration_seconds_bucket{le="+Inf"} 110
gpushare_filter_duration_seconds_sum 0.155
gpushare_filter_duration_seconds_count 110
# TYPE gpushare_bind_duration_seconds histogram
gpushare_bind_duration_seconds_bucket{le="0.01"} 0
gpushare_bind_duration_seconds_bucket{le="+Inf"} 0
gpushare_bind_duration_seconds_sum 0
gpushare_bind_duration_seconds_count 0
`
	parse := func(text string) metrics.Scrape {
		s, err := metrics.Parse(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	var s Summary
	s.SetLatencies(parse(before), parse(after))
	tests := []struct {
		verb    string
		present bool
		inLine  string
	}{
		{"filter", true, " filter_p50=1.00ms filter_p99=3.80ms"},
		{"bind", true, " bind_p50=n/a bind_p99=n/a"},
		{"prioritize", false, "prioritize_"},
	}
	line := s.Line()
	for _, tc := range tests {
		t.Run(tc.verb, func(t *testing.T) {
			if _, ok := s.Latencies[tc.verb]; ok != tc.present {
				t.Errorf("latency present %v, want %v", ok, tc.present)
			}
			if strings.Contains(line, tc.inLine) != tc.present {
				t.Errorf("line %q: contains %q should be %v", line, tc.inLine, tc.present)
			}
		})
	}
}

func TestWriteResultsEmptyHistogram(t *testing.T) {
	s := Summary{Latencies: map[string]metrics.Latency{"bind": {}}}
	dir := t.TempDir()
	if err := writeResults(dir, s, newRecorder(1000), 1); err != nil {
		t.Fatalf("summary with an empty histogram not written: %v", err)
	}
	got, err := readSummary(dir)
	if err != nil {
		t.Fatal(err)
	}
	if l := got.Latencies["bind"]; l.Count != 0 {
		t.Errorf("bind latency read back %+v, want count 0", l)
	}
}

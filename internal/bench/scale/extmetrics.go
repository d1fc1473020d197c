package scale

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Extender metric names (pkg/metrics and the Go collector).
const (
	metricFilter     = "gpushare_filter_duration_seconds"
	metricPrioritize = "gpushare_prioritize_duration_seconds"
	metricBind       = "gpushare_bind_duration_seconds"
	// gaugeAllocated is summed over all cards: the units the extender's cache holds.
	gaugeAllocated = "gpushare_card_allocated_units"
	gaugeHeapInuse = "go_memstats_heap_inuse_bytes"
	gaugeHeapAlloc = "go_memstats_heap_alloc_bytes"
	gaugeSys       = "go_memstats_sys_bytes"
	// counterBindFailures is summed over its reasons.
	counterBindFailures = "gpushare_bind_failures_total"
)

// Scrape is one read of the extender's /metrics.
type Scrape struct {
	Hist   map[string]Histogram // the three latency histograms
	Gauges map[string]float64   // gauges and counters, summed over label sets
}

// ScrapeExtender fetches url (the extender's /metrics). Errors: HTTP or format problems.
func ScrapeExtender(ctx context.Context, client *http.Client, url string) (Scrape, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Scrape{}, fmt.Errorf("scraping %s: %w", url, err)
	}
	// Plain text format: the parser below reads nothing else.
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		return Scrape{}, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Scrape{}, fmt.Errorf("scraping %s: HTTP %s", url, resp.Status)
	}
	s, err := parseScrape(resp.Body)
	if err != nil {
		return Scrape{}, fmt.Errorf("scraping %s: %w", url, err)
	}
	return s, nil
}

func parseScrape(r io.Reader) (Scrape, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return Scrape{}, fmt.Errorf("parsing metrics: %w", err)
	}
	s := Scrape{Hist: map[string]Histogram{}, Gauges: map[string]float64{}}
	for _, n := range []string{metricFilter, metricPrioritize, metricBind} {
		if mf, ok := fams[n]; ok {
			s.Hist[n] = histogramOf(mf)
		}
	}
	for _, n := range []string{gaugeAllocated, gaugeHeapInuse, gaugeHeapAlloc, gaugeSys, counterBindFailures} {
		mf, ok := fams[n]
		if !ok {
			continue
		}
		for _, m := range mf.GetMetric() {
			switch mf.GetType() {
			case dto.MetricType_GAUGE:
				s.Gauges[n] += m.GetGauge().GetValue()
			case dto.MetricType_COUNTER:
				s.Gauges[n] += m.GetCounter().GetValue()
			}
		}
	}
	return s, nil
}

// Latency summarises the observations of one histogram between two scrapes, in
// milliseconds.
type Latency struct {
	Count  int64   `json:"count"`
	MeanMs float64 `json:"meanMs"`
	P50Ms  float64 `json:"p50Ms"`
	P99Ms  float64 `json:"p99Ms"`
}

// latencyBetween diffs the named histogram of after against before. The quantiles are
// interpolated inside the buckets (100 µs · 2^k bounds), as histogram_quantile does.
func latencyBetween(before, after Scrape, name string) Latency {
	a, ok := after.Hist[name]
	if !ok {
		return Latency{}
	}
	d := a.Sub(before.Hist[name])
	l := Latency{Count: int64(d.Count)}
	if d.Count > 0 {
		l.MeanMs = d.Sum / d.Count * 1e3
		l.P50Ms = nanToZero(d.Quantile(0.5)) * 1e3
		l.P99Ms = nanToZero(d.Quantile(0.99)) * 1e3
	}
	return l
}

func nanToZero(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return v
}

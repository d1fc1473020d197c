package metrics

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape is one read of a /metrics endpoint.
type Scrape struct {
	Hist   map[string]Histogram // every histogram, by family name
	Values map[string]float64   // every gauge and counter, summed over label sets
}

// Fetch returns the body of a /metrics endpoint in the text format (callers keep it next
// to their results; Parse reads it).
func Fetch(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	// Without it client_golang may answer in a format Parse does not read.
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping %s: HTTP %s", url, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	return b, nil
}

// Get fetches and parses url.
func Get(ctx context.Context, client *http.Client, url string) (Scrape, error) {
	body, err := Fetch(ctx, client, url)
	if err != nil {
		return Scrape{}, err
	}
	s, err := Parse(bytes.NewReader(body))
	if err != nil {
		return Scrape{}, fmt.Errorf("scraping %s: %w", url, err)
	}
	return s, nil
}

// Parse reads the Prometheus text exposition format.
func Parse(r io.Reader) (Scrape, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return Scrape{}, fmt.Errorf("parsing metrics: %w", err)
	}
	s := Scrape{Hist: map[string]Histogram{}, Values: map[string]float64{}}
	for name, mf := range fams {
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM:
			s.Hist[name] = histogramOf(mf)
		case dto.MetricType_GAUGE, dto.MetricType_COUNTER:
			for _, m := range mf.GetMetric() {
				s.Values[name] += m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	return s, nil
}

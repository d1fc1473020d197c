package replay

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// Histogram is one Prometheus histogram summed over all its label sets: cumulative counts
// per upper bound (seconds for the extender's *_duration_seconds).
type Histogram struct {
	Buckets map[float64]float64 // le → cumulative count; +Inf included
	Count   float64
	Sum     float64
}

// Histograms maps a metric base name (without _bucket/_count/_sum) to its histogram.
type Histograms map[string]*Histogram

// ParseHistograms reads the Prometheus text exposition format and keeps the histograms
// whose base name is in names (all when names is empty). Malformed sample lines are errors.
func ParseHistograms(r io.Reader, names ...string) (Histograms, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := Histograms{}
	get := func(base string) *Histogram {
		h := out[base]
		if h == nil {
			h = &Histogram{Buckets: map[float64]float64{}}
			out[base] = h
		}
		return h
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		name, labels, value, err := parseSample(text)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d: %w", line, err)
		}
		var base, kind string
		for _, suf := range []string{"_bucket", "_count", "_sum"} {
			if strings.HasSuffix(name, suf) {
				base, kind = strings.TrimSuffix(name, suf), suf
				break
			}
		}
		if base == "" || (len(want) > 0 && !want[base]) {
			continue
		}
		switch kind {
		case "_bucket":
			le, ok := labels["le"]
			if !ok {
				return nil, fmt.Errorf("metrics line %d: bucket without le label", line)
			}
			bound, err := strconv.ParseFloat(le, 64)
			if err != nil {
				return nil, fmt.Errorf("metrics line %d: le %q: %w", line, le, err)
			}
			get(base).Buckets[bound] += value
		case "_count":
			get(base).Count += value
		case "_sum":
			get(base).Sum += value
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading metrics: %w", err)
	}
	return out, nil
}

// parseSample splits `name{a="b",c="d"} 1.5 [timestamp]`.
func parseSample(s string) (name string, labels map[string]string, value float64, err error) {
	labels = map[string]string{}
	rest := s
	if i := strings.IndexByte(s, '{'); i >= 0 {
		j := strings.LastIndexByte(s, '}')
		if j < i {
			return "", nil, 0, fmt.Errorf("unbalanced braces in %q", s)
		}
		name = s[:i]
		for _, kv := range splitLabels(s[i+1 : j]) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return "", nil, 0, fmt.Errorf("label %q without =", kv)
			}
			uq, err := strconv.Unquote(strings.TrimSpace(v))
			if err != nil {
				return "", nil, 0, fmt.Errorf("label %s: value %s is not quoted", k, v)
			}
			labels[strings.TrimSpace(k)] = uq
		}
		rest = s[j+1:]
	} else {
		sp := strings.IndexAny(s, " \t")
		if sp < 0 {
			return "", nil, 0, fmt.Errorf("no value in %q", s)
		}
		name, rest = s[:sp], s[sp:]
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return "", nil, 0, fmt.Errorf("no value in %q", s)
	}
	value, err = strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return "", nil, 0, fmt.Errorf("value %q: %w", fields[0], err)
	}
	return strings.TrimSpace(name), labels, value, nil
}

// splitLabels splits a label list on commas outside quotes.
func splitLabels(s string) []string {
	var out []string
	var b strings.Builder
	inQuote, escaped := false, false
	for _, c := range s {
		switch {
		case escaped:
			escaped = false
		case c == '\\':
			escaped = true
		case c == '"':
			inQuote = !inQuote
		case c == ',' && !inQuote:
			if t := strings.TrimSpace(b.String()); t != "" {
				out = append(out, t)
			}
			b.Reset()
			continue
		}
		b.WriteRune(c)
	}
	if t := strings.TrimSpace(b.String()); t != "" {
		out = append(out, t)
	}
	return out
}

// Sub returns h − before: the observations made between two scrapes. A nil before
// returns a copy of h.
func (h *Histogram) Sub(before *Histogram) *Histogram {
	d := &Histogram{Buckets: map[float64]float64{}, Count: h.Count, Sum: h.Sum}
	for le, c := range h.Buckets {
		d.Buckets[le] = c
	}
	if before == nil {
		return d
	}
	d.Count -= before.Count
	d.Sum -= before.Sum
	for le, c := range before.Buckets {
		d.Buckets[le] -= c
	}
	return d
}

// Quantile estimates the q-quantile (0..1) as Prometheus' histogram_quantile does: linear
// interpolation inside the bucket holding the rank; the highest finite bound when the rank
// falls in +Inf. NaN when there are no observations.
func (h *Histogram) Quantile(q float64) float64 {
	bounds := make([]float64, 0, len(h.Buckets))
	for le := range h.Buckets {
		bounds = append(bounds, le)
	}
	sort.Float64s(bounds)
	if len(bounds) == 0 {
		return math.NaN()
	}
	total := h.Buckets[bounds[len(bounds)-1]]
	if !math.IsInf(bounds[len(bounds)-1], 1) {
		total = math.Max(total, h.Count)
	}
	if total <= 0 {
		return math.NaN()
	}
	rank := q * total
	prevBound, prevCount := 0.0, 0.0
	for _, le := range bounds {
		c := h.Buckets[le]
		if c >= rank {
			if math.IsInf(le, 1) {
				return prevBound
			}
			if c == prevCount {
				return le
			}
			return prevBound + (le-prevBound)*(rank-prevCount)/(c-prevCount)
		}
		prevBound, prevCount = le, c
	}
	return prevBound
}

// FetchMetrics returns the body of a /metrics endpoint.
func FetchMetrics(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
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

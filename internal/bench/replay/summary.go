package replay

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpushare/gpushare/internal/bench/metrics"
)

// Summary is the result of one replay (summary.json).
type Summary struct {
	Policy string  `json:"policy"`
	Trace  string  `json:"trace"`
	Mode   string  `json:"mode"` // "cluster" or "offline"
	Seed   int64   `json:"seed"`
	Tune   float64 `json:"tune"`
	Unit   string  `json:"unit"`

	Pods   int `json:"pods"`
	Bound  int `json:"bound"`
	Failed int `json:"failed"`
	// Evictions are the pods an offline defragmenter moved (--offline-defrag).
	Evictions     int   `json:"evictions,omitempty"`
	CapacityMilli int64 `json:"gpu_capacity_milli"`

	// UnallocatedAt100 is 100 − allocated % when the arrived GPU request first reached
	// 100 % of capacity; nil when it never did (e.g. --limit).
	UnallocatedAt100 *float64 `json:"unallocated_pct_at_100,omitempty"`
	ArrivedPct       float64  `json:"arrived_pct_final"`
	AllocatedPct     float64  `json:"allocated_pct_final"`

	WallSeconds float64 `json:"wall_seconds"`
	PodsPerSec  float64 `json:"pods_per_second"`

	// Latencies by extender verb ("filter", "prioritize", "bind", from its /metrics) and
	// "e2e" (create → bound or unschedulable, measured by the driver).
	Latencies map[string]metrics.Latency `json:"latencies,omitempty"`
	Started   time.Time                  `json:"started"`
}

// newSummary fills the counts and percentages from the record.
func newSummary(rec *recorder, wall time.Duration) Summary {
	s := Summary{
		Pods: len(rec.steps), Bound: rec.bound, Failed: rec.failed, Evictions: rec.evictions, CapacityMilli: rec.capacity,
		ArrivedPct: rec.Pct(rec.arrived), AllocatedPct: rec.Pct(rec.allocated),
		WallSeconds: wall.Seconds(),
	}
	if v, ok := rec.UnallocatedAt100(); ok {
		s.UnallocatedAt100 = &v
	}
	if wall > 0 {
		s.PodsPerSec = float64(len(rec.steps)) / wall.Seconds()
	}
	return s
}

// SetLatencies fills Latencies from two scrapes of the extender's /metrics; a verb whose
// histogram after lacks is left out.
func (s *Summary) SetLatencies(before, after metrics.Scrape) {
	verbs := map[string]string{"filter": metrics.FilterSeconds, "prioritize": metrics.PrioritizeSeconds, "bind": metrics.BindSeconds}
	for verb, name := range verbs {
		if _, ok := after.Hist[name]; !ok {
			continue
		}
		if s.Latencies == nil {
			s.Latencies = map[string]metrics.Latency{}
		}
		s.Latencies[verb] = metrics.Between(before, after, name)
	}
}

// Line is the one-line summary printed at the end.
func (s Summary) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "policy=%s trace=%s seed=%d tune=%g mode=%s", s.Policy, s.Trace, s.Seed, s.Tune, s.Mode)
	if s.UnallocatedAt100 != nil {
		fmt.Fprintf(&b, " unallocated@100%%=%.2f%%", *s.UnallocatedAt100)
	} else {
		fmt.Fprintf(&b, " unallocated@100%%=n/a (arrived %.1f%%)", s.ArrivedPct)
	}
	fmt.Fprintf(&b, " pods=%d failed=%d allocated=%.2f%% arrived=%.2f%% wall=%.0fs pods/s=%.1f",
		s.Pods, s.Failed, s.AllocatedPct, s.ArrivedPct, s.WallSeconds, s.PodsPerSec)
	if s.Evictions > 0 {
		fmt.Fprintf(&b, " evictions=%d", s.Evictions)
	}
	for _, verb := range []string{"filter", "prioritize", "bind", "e2e"} {
		if l, ok := s.Latencies[verb]; ok {
			fmt.Fprintf(&b, " %s_p50=%s %s_p99=%s", verb, ms(l, l.P50Ms), verb, ms(l, l.P99Ms))
		}
	}
	return b.String()
}

// ms formats a quantile of l; without observations there is none.
func ms(l metrics.Latency, v float64) string {
	if l.Count == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2fms", v)
}

// writeResults writes summary.json and steps.csv into dir (created if needed).
func writeResults(dir string, s Summary, rec *recorder, stepEvery int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating result folder: %w", err)
	}
	js, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding summary: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), append(js, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing summary: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, "steps.csv"))
	if err != nil {
		return fmt.Errorf("writing steps: %w", err)
	}
	if err := rec.WriteSteps(f, stepEvery); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing steps: %w", err)
	}
	return nil
}

// readSummary reads dir/summary.json.
func readSummary(dir string) (Summary, error) {
	var s Summary
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		return s, fmt.Errorf("reading summary: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("%s: %w", filepath.Join(dir, "summary.json"), err)
	}
	return s, nil
}

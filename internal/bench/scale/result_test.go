package scale

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpushare/gpushare/internal/bench/metrics"
)

func TestMarkdownVerdicts(t *testing.T) {
	plain := &PhaseResult{Name: "plain", Pods: 100, Seconds: 1, PodsPerSecond: 100}
	tests := []struct {
		name      string
		extPerSec float64
		filterP99 float64
		burstOK   bool
		burstSecs float64
		rss       float64
		want      []string
	}{
		{"all met", 90, 4, true, 1.5, 80, []string{"| b/a | 0.90 | ≥ 0.8 | met |", "p99 ≤ 10 ms | met |", "| ≤ 2 s | met |", "| ≤ 100 MiB | met |"}},
		{"all missed", 50, 12, false, 2.5, 120, []string{"| b/a | 0.50 | ≥ 0.8 | **missed** |", "p99 ≤ 10 ms | **missed** |", "| ≤ 2 s | **missed** |", "| ≤ 100 MiB | **missed** |"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Results{
				Plain: plain,
				Extender: &PhaseResult{Name: "extender", Pods: 100, Seconds: 100 / tc.extPerSec, PodsPerSecond: tc.extPerSec,
					Extender: &ExtenderFigures{Filter: metrics.Latency{Count: 100, P99Ms: tc.filterP99}}},
				Burst:  &BurstResult{Pods: 100, Units: 6, WantBound: 16, OK: tc.burstOK, DecidedSeconds: tc.burstSecs},
				Memory: &MemoryResult{Nodes: 5000, Placed: 40000, RSSMiB: tc.rss},
			}
			md := r.Markdown()
			for _, w := range tc.want {
				if !strings.Contains(md, w) {
					t.Errorf("report lacks %q:\n%s", w, md)
				}
			}
		})
	}
}

func TestResultsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if err := WriteJSON(dir+"/"+FileBurst, BurstResult{Pods: 100, Bound: 16, Unschedulable: 84, OK: true}); err != nil {
		t.Fatal(err)
	}
	r, err := LoadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.Burst == nil || r.Burst.Bound != 16 || !r.Burst.OK {
		t.Errorf("burst result not read back: %+v", r.Burst)
	}
	if r.Plain != nil || r.Memory != nil {
		t.Errorf("steps that did not run are not nil: %+v", r)
	}
	if md := r.Markdown(); strings.Contains(md, "b/a") {
		t.Errorf("report shows a ratio without phases:\n%s", md)
	}
}

func TestMarkdownCPUPerPod(t *testing.T) {
	r := Results{
		Plain:    &PhaseResult{Pods: 100, PodsPerSecond: 10, SchedulerCPUSeconds: 10},
		Extender: &PhaseResult{Pods: 100, PodsPerSecond: 8, SchedulerCPUSeconds: 8, Extender: &ExtenderFigures{CPUSeconds: 4}},
	}
	want := "| 100.0 ms; 80.0 + 40.0 = 120.0 ms (if CPU-bound, b/a = 0.83) |"
	if md := r.Markdown(); !strings.Contains(md, want) {
		t.Errorf("report lacks %q:\n%s", want, md)
	}
}

// TestMarkdownPlugin: the plugin phase is reported beside phase a like the extender's: its
// rate, the ratio against the target, the scheduler's CPU per pod and the card check.
func TestMarkdownPlugin(t *testing.T) {
	plain := &PhaseResult{Pods: 100, PodsPerSecond: 100, SchedulerCPUSeconds: 1}
	tests := []struct {
		name     string
		plain    *PhaseResult
		plugin   *PhaseResult
		policy   string
		want     []string
		wantNone []string
	}{
		{
			name:  "met, cards clean",
			plain: plain,
			plugin: &PhaseResult{Pods: 100, Seconds: 100.0 / 96, PodsPerSecond: 96, SchedulerCPUSeconds: 1.25,
				Cards: &CardCheck{Over: []string{}, Unannotated: []string{}}},
			want: []string{
				"| b) gpushare-scheduler (plugin) | 96.0 pods/s",
				"| b/a (plugin, binpack) | 0.96 | ≥ 0.95 | met |",
				"| CPU per pod: a) scheduler; b) gpushare-scheduler (plugin) | 10.0 ms; 12.5 ms (if CPU-bound, b/a = 0.80) |",
				"| b) plugin: cards over capacity / unannotated | 0 / 0 | 0 / 0 | met |",
			},
			wantNone: []string{"| b/a |", "scheduler + extender"},
		},
		{
			name:   "missed, a card over capacity",
			plain:  plain,
			plugin: &PhaseResult{Pods: 100, PodsPerSecond: 50, Cards: &CardCheck{Over: []string{"n/0: 17 > 16"}, Unannotated: []string{}}},
			want: []string{
				"| b/a (plugin, binpack) | 0.50 | ≥ 0.95 | **missed** |",
				"| b) plugin: cards over capacity / unannotated | 1 / 0 | 0 / 0 | **missed** |",
			},
			// No CPU figure without the plugin phase's CPU.
			wantNone: []string{"gpushare-scheduler (plugin) | 10.0 ms"},
		},
		{
			name:   "fgd: the same target",
			plain:  plain,
			policy: "fgd",
			plugin: &PhaseResult{Pods: 100, PodsPerSecond: 96},
			want:   []string{"| b/a (plugin, fgd) | 0.96 | ≥ 0.95 | met |"},
		},
		{
			name:     "no phase a: no ratio",
			plugin:   &PhaseResult{Pods: 100, PodsPerSecond: 50},
			want:     []string{"| b) gpushare-scheduler (plugin) | 50.0 pods/s"},
			wantNone: []string{"b/a"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			md := Results{Plain: tc.plain, Plugin: tc.plugin, PluginPolicy: tc.policy}.Markdown()
			checkReport(t, md, tc.want, tc.wantNone)
		})
	}
}

// checkReport fails t unless md holds every line part of want and none of absent.
func checkReport(t *testing.T, md string, want, absent []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(md, w) {
			t.Errorf("report lacks %q:\n%s", w, md)
		}
	}
	for _, a := range absent {
		if strings.Contains(md, a) {
			t.Errorf("report has %q:\n%s", a, md)
		}
	}
}

// TestResultsLoadPlugin: plugin.json is read back as the plugin phase, not as the extender's.
func TestResultsLoadPlugin(t *testing.T) {
	dir := t.TempDir()
	if err := WriteJSON(dir+"/"+FilePlugin, PhaseResult{Name: SetPlugin, Pods: 7}); err != nil {
		t.Fatal(err)
	}
	r, err := LoadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.Plugin == nil || r.Plugin.Pods != 7 || r.Extender != nil {
		t.Errorf("plugin %+v extender %+v; want the plugin phase only", r.Plugin, r.Extender)
	}
}

// TestResultsRounds: the plugin mode's round-N folders are read in order and judged by the
// median b/a, so one noisy round does not decide the verdict.
func TestResultsRounds(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, v PhaseResult) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := WriteJSON(name, v); err != nil {
			t.Fatal(err)
		}
	}
	for i, b := range []float64{48, 40, 50} { // b/a 0.96, 0.80, 1.00: median 0.96
		round := filepath.Join(dir, fmt.Sprintf("%s%d", RoundDirPrefix, i+1))
		write(filepath.Join(round, FilePlain), PhaseResult{Name: SetPlain, Pods: 100, PodsPerSecond: 50, SchedulerCPUSeconds: 2.5})
		write(filepath.Join(round, FilePlugin), PhaseResult{Name: SetPlugin, Pods: 100, PodsPerSecond: b, SchedulerCPUSeconds: 3})
		write(filepath.Join(dir, FilePlain), PhaseResult{Name: SetPlain, Pods: 100, PodsPerSecond: 50})
		write(filepath.Join(dir, FilePlugin), PhaseResult{Name: SetPlugin, Pods: 100, PodsPerSecond: b})
	}
	r, err := LoadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Rounds) != 3 || r.Rounds[1].Ratio() != 0.8 {
		t.Fatalf("rounds %+v; want three, the second at b/a 0.8", r.Rounds)
	}
	md := r.Markdown()
	for _, want := range []string{"3 alternating rounds | 0.96, 0.80, 1.00: **median 0.96** | ≥ 0.95 | met", "25.0; 30.0 · 25.0; 30.0"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}

	// A round folder without its plugin phase is an error, not a silent single round.
	if err := os.Remove(filepath.Join(dir, RoundDirPrefix+"2", FilePlugin)); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadResults(dir); err == nil {
		t.Error("LoadResults accepted a round without its plugin phase")
	}
}

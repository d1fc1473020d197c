package scale

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Pod sets of the scheduling phases: a) kube-scheduler alone, b) kube-scheduler with the
// extender, or b) gpushare-scheduler (the plugin). Each phase's result is <set>.json.
const (
	SetPlain    = "plain"
	SetExtender = "extender"
	SetPlugin   = "plugin"
	// SetDRA is kube-scheduler alone on pods asking through ResourceClaims, SetDRAPlugin
	// gpushare-scheduler on the same (MODE=dra).
	SetDRA       = "dra"
	SetDRAPlugin = "dra-plugin"
)

// Result file names in the output folder, one per step.
const (
	FileSetup          = "setup.json"
	FilePlain          = "plain.json"
	FileExtender       = "extender.json"
	FilePlugin         = "plugin.json"
	FileDRA            = "dra.json"
	FileDRAPlugin      = "dra-plugin.json"
	FileDRASetup       = "dra-setup.json"
	FileBurst          = "burst.json"
	FileMemory         = "memory.json"
	FileMemoryRestart  = "memory-restart.json"
	FileReportMarkdown = "report.md"
	// RoundDirPrefix names the folders of the plugin mode's rounds (round-1, round-2, …),
	// each holding that round's plain.json and plugin.json.
	RoundDirPrefix = "round-"
)

// Targets the scale benchmark is judged against (docs/design/benchmarks.md).
const (
	TargetRatio = 0.8
	// TargetPluginRatio is gpushare-scheduler's rate over kube-scheduler's alone, and
	// TargetPluginRatioWorkload that under a workload-aware policy (fgd), which rates every
	// node against the cluster's workload.
	TargetPluginRatio         = 0.9
	TargetPluginRatioWorkload = 0.8
	TargetFilterP99Ms         = 10.0
	TargetBurstSeconds        = 2.0
	TargetRSSMiB              = 100.0
	TargetHandlerFilter       = 2.0 // ms, Go benchmark (see test/bench)
)

// WriteJSON writes v indented to path. Errors: encoding or file errors.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// readJSON reads path into v; ok is false when the file does not exist (step not run).
func readJSON(path string, v any) (ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", path, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("decoding %s: %w", path, err)
	}
	return true, nil
}

// Results are every step's results; nil for a step that did not run.
type Results struct {
	Setup    *SetupResult
	Plain    *PhaseResult
	Extender *PhaseResult
	Plugin   *PhaseResult // phase b by gpushare-scheduler instead of kube-scheduler + extender
	// DRA and DRAPlugin are the DRA mode's phases on claims: kube-scheduler alone, and
	// gpushare-scheduler; DRASetup the publishing of the ResourceSlices.
	DRA, DRAPlugin *PhaseResult
	DRASetup       *SetupResult
	// PluginPolicy is the GPUShare policy of the plugin phase (its target depends on it).
	PluginPolicy  string
	Burst         *BurstResult
	Memory        *MemoryResult
	MemoryRestart *MemoryResult
	// Rounds are the plugin mode's alternating a/b rounds, in order (round-N folders);
	// nil for a single round, whose phases are Plain and Plugin.
	Rounds []Round
}

// Round is one a/b pair of the plugin mode: kube-scheduler alone, then gpushare-scheduler,
// on the same nodes and pods, back to back.
type Round struct {
	Plain, Plugin PhaseResult
	// DRA and DRAPlugin are the DRA mode's phases of the round (nil in other modes).
	DRA, DRAPlugin *PhaseResult
}

// Ratio is the round's b/a in pods/s (0 when a measured nothing).
func (r Round) Ratio() float64 {
	if r.Plain.PodsPerSecond <= 0 {
		return 0
	}
	return r.Plugin.PodsPerSecond / r.Plain.PodsPerSecond
}

// median of v (not empty), which it sorts.
func median(v []float64) float64 {
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// LoadResults reads the result files of dir. Errors: unreadable or malformed files.
func LoadResults(dir string) (Results, error) {
	var r Results
	load := func(name string, dst any, set func()) error {
		ok, err := readJSON(filepath.Join(dir, name), dst)
		if ok {
			set()
		}
		return err
	}
	var (
		setup      SetupResult
		plain, ext PhaseResult
		plugin     PhaseResult
		draA, draC PhaseResult
		draSetup   SetupResult
		burst      BurstResult
		mem, memR  MemoryResult
	)
	err := errors.Join(
		load(FileSetup, &setup, func() { r.Setup = &setup }),
		load(FilePlain, &plain, func() { r.Plain = &plain }),
		load(FileExtender, &ext, func() { r.Extender = &ext }),
		load(FilePlugin, &plugin, func() { r.Plugin = &plugin }),
		load(FileDRA, &draA, func() { r.DRA = &draA }),
		load(FileDRAPlugin, &draC, func() { r.DRAPlugin = &draC }),
		load(FileDRASetup, &draSetup, func() { r.DRASetup = &draSetup }),
		load(FileBurst, &burst, func() { r.Burst = &burst }),
		load(FileMemory, &mem, func() { r.Memory = &mem }),
		load(FileMemoryRestart, &memR, func() { r.MemoryRestart = &memR }),
	)
	if err != nil {
		return r, err
	}
	r.Rounds, err = loadRounds(dir)
	return r, err
}

// loadRounds reads dir's round-N folders, N = 1, 2, … until one is missing; nil for fewer
// than two. Errors: a round folder without both phases, or malformed files.
func loadRounds(dir string) ([]Round, error) {
	var out []Round
	for n := 1; ; n++ {
		sub := filepath.Join(dir, fmt.Sprintf("%s%d", RoundDirPrefix, n))
		if _, err := os.Stat(sub); errors.Is(err, fs.ErrNotExist) {
			break
		}
		var rd Round
		okA, errA := readJSON(filepath.Join(sub, FilePlain), &rd.Plain)
		okB, errB := readJSON(filepath.Join(sub, FilePlugin), &rd.Plugin)
		if err := errors.Join(errA, errB); err != nil {
			return nil, err
		}
		if !okA || !okB {
			return nil, fmt.Errorf("%s lacks %s or %s", sub, FilePlain, FilePlugin)
		}
		if err := loadDRARound(sub, &rd); err != nil {
			return nil, err
		}
		out = append(out, rd)
	}
	if len(out) < 2 {
		return nil, nil
	}
	return out, nil
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

// Markdown renders the results as the table of docs/design/benchmarks.md: measured figure,
// target, met or missed. Steps that did not run are left out.
func (r Results) Markdown() string {
	var b strings.Builder
	row := func(what, measured, target, verdict string) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", what, measured, target, verdict)
	}
	b.WriteString("| figure | measured | target | |\n|---|---|---|---|\n")
	if r.Setup != nil {
		row("nodes (8 cards × 16 units)", fmt.Sprintf("%d (created in %.1f s)", r.Setup.Nodes, r.Setup.Seconds), "5000", "")
	}
	dra := r.DRA != nil || r.DRAPlugin != nil
	if r.Plain != nil && !dra {
		row("a) scheduler alone", fmt.Sprintf("%.1f pods/s (%d pods in %.1f s; load %s → %s)",
			r.Plain.PodsPerSecond, r.Plain.Pods, r.Plain.Seconds, r.Plain.LoadBefore, r.Plain.LoadAfter), "", "")
	}
	if r.Extender != nil {
		row("b) scheduler + extender", fmt.Sprintf("%.1f pods/s (%d pods in %.1f s; load %s → %s)",
			r.Extender.PodsPerSecond, r.Extender.Pods, r.Extender.Seconds, r.Extender.LoadBefore, r.Extender.LoadAfter), "", "")
	}
	if r.Plain != nil && r.Extender != nil && r.Plain.PodsPerSecond > 0 {
		ratio := r.Extender.PodsPerSecond / r.Plain.PodsPerSecond
		row("b/a", fmt.Sprintf("%.2f", ratio), fmt.Sprintf("≥ %.1f", TargetRatio), met(ratio >= TargetRatio))
	}
	if r.Plain != nil && r.Extender != nil && r.Plain.SchedulerCPUSeconds > 0 && r.Extender.SchedulerCPUSeconds > 0 && r.Extender.Extender != nil {
		a := r.Plain.SchedulerCPUSeconds * 1e3 / float64(r.Plain.Pods)
		bs := r.Extender.SchedulerCPUSeconds * 1e3 / float64(r.Extender.Pods)
		be := r.Extender.Extender.CPUSeconds * 1e3 / float64(r.Extender.Pods)
		row("CPU per pod: a) scheduler; b) scheduler + extender", fmt.Sprintf("%.1f ms; %.1f + %.1f = %.1f ms (if CPU-bound, b/a = %.2f)", a, bs, be, bs+be, a/(bs+be)), "", "")
	}
	if r.Plugin != nil && !dra {
		p := r.Plugin
		row("b) gpushare-scheduler (plugin)", fmt.Sprintf("%.1f pods/s (%d pods in %.1f s; load %s → %s)",
			p.PodsPerSecond, p.Pods, p.Seconds, p.LoadBefore, p.LoadAfter), "", "")
		if r.Plain != nil && r.Plain.PodsPerSecond > 0 {
			ratio, target := p.PodsPerSecond/r.Plain.PodsPerSecond, r.pluginTarget()
			row("b/a (plugin, "+r.pluginPolicy()+")", fmt.Sprintf("%.2f", ratio), fmt.Sprintf("≥ %.1f", target), met(ratio >= target))
		}
		if r.Plain != nil && r.Plain.SchedulerCPUSeconds > 0 && p.SchedulerCPUSeconds > 0 {
			a := r.Plain.SchedulerCPUSeconds * 1e3 / float64(r.Plain.Pods)
			bp := p.SchedulerCPUSeconds * 1e3 / float64(p.Pods)
			row("CPU per pod: a) scheduler; b) gpushare-scheduler (plugin)", fmt.Sprintf("%.1f ms; %.1f ms (if CPU-bound, b/a = %.2f)", a, bp, a/bp), "", "")
		}
		if len(r.Rounds) > 1 {
			ratios, cpu := make([]float64, len(r.Rounds)), make([]string, len(r.Rounds))
			for i, rd := range r.Rounds {
				ratios[i] = rd.Ratio()
				cpu[i] = fmt.Sprintf("%.1f; %.1f", rd.Plain.SchedulerCPUSeconds*1e3/float64(max(rd.Plain.Pods, 1)),
					rd.Plugin.SchedulerCPUSeconds*1e3/float64(max(rd.Plugin.Pods, 1)))
			}
			byRound := make([]string, len(ratios))
			for i, v := range ratios {
				byRound[i] = fmt.Sprintf("%.2f", v)
			}
			m, target := median(ratios), r.pluginTarget()
			row(fmt.Sprintf("b/a (plugin, %s), %d alternating rounds", r.pluginPolicy(), len(r.Rounds)),
				fmt.Sprintf("%s: **median %.2f**", strings.Join(byRound, ", "), m), fmt.Sprintf("≥ %.1f", target), met(m >= target))
			row("CPU per pod by round: a; b (ms)", strings.Join(cpu, " · "), "", "")
		}
		if c := p.Cards; c != nil {
			row("b) plugin: cards over capacity / unannotated", fmt.Sprintf("%d / %d", len(c.Over), len(c.Unannotated)), "0 / 0", met(len(c.Over) == 0 && len(c.Unannotated) == 0))
		}
	}
	r.draMarkdown(row)
	if r.Extender != nil && r.Extender.Extender != nil {
		e := r.Extender.Extender
		row("filter over HTTP p50 / p99 (mean)", fmt.Sprintf("%.2f / %.2f ms (%.2f ms, %d calls)", e.Filter.P50Ms, e.Filter.P99Ms, e.Filter.MeanMs, e.Filter.Count),
			fmt.Sprintf("p99 ≤ %.0f ms", TargetFilterP99Ms), met(e.Filter.Count > 0 && e.Filter.P99Ms <= TargetFilterP99Ms))
		row("prioritize p50 / p99 (mean)", fmt.Sprintf("%.2f / %.2f ms (%.2f ms, %d calls)", e.Prioritize.P50Ms, e.Prioritize.P99Ms, e.Prioritize.MeanMs, e.Prioritize.Count), "", "")
		row("bind p50 / p99 (mean)", fmt.Sprintf("%.2f / %.2f ms (%.2f ms, %d calls)", e.Bind.P50Ms, e.Bind.P99Ms, e.Bind.MeanMs, e.Bind.Count), "", "")
		row("extender CPU during b", fmt.Sprintf("%.1f s (%.1f ms/pod)", e.CPUSeconds, e.CPUSeconds*1e3/float64(r.Extender.Pods)), "", "")
		row("extender RSS after b (peak)", fmt.Sprintf("%.0f MiB (%.0f MiB)", e.RSSMiB, e.HWMMiB), "", "")
	}
	if r.Extender != nil && r.Extender.Cards != nil {
		c := r.Extender.Cards
		row("b) cards over capacity / unannotated", fmt.Sprintf("%d / %d", len(c.Over), len(c.Unannotated)), "0 / 0", met(len(c.Over) == 0 && len(c.Unannotated) == 0))
	}
	if r.Burst != nil {
		u := r.Burst
		row(fmt.Sprintf("burst: %d pods × %d units on one node", u.Pods, u.Units),
			fmt.Sprintf("%d bound, %d unschedulable, %d cards over capacity", u.Bound, u.Unschedulable, len(u.Cards.Over)),
			fmt.Sprintf("%d bound, %d unschedulable, 0 over", u.WantBound, u.Pods-u.WantBound), met(u.OK))
		if u.Filter != nil && u.Bind != nil {
			row("burst: extender calls", fmt.Sprintf("%d filter (p99 %.2f ms), %d bind (p99 %.2f ms), %.0f binds refused (card race lost, pod requeued)",
				u.Filter.Count, u.Filter.P99Ms, u.Bind.Count, u.Bind.P99Ms, u.BindsFailed), "", "")
		}
		row("burst: all decided after", fmt.Sprintf("%.2f s (load %s)", u.DecidedSeconds, u.LoadAfter),
			fmt.Sprintf("≤ %.0f s", TargetBurstSeconds), met(u.DecidedSeconds <= TargetBurstSeconds))
	}
	for _, m := range []struct {
		label string
		r     *MemoryResult
	}{{"extender RSS, placed pods loaded by watch", r.Memory}, {"extender RSS after a restart (LIST)", r.MemoryRestart}} {
		if m.r == nil {
			continue
		}
		row(fmt.Sprintf("%s (%d nodes, %d pods)", m.label, m.r.Nodes, m.r.Placed),
			fmt.Sprintf("%.0f MiB (peak %.0f, Go heap in use %.0f, Go sys %.0f; load %s)", m.r.RSSMiB, m.r.HWMMiB, m.r.HeapInuseMiB, m.r.GoSysMiB, m.r.LoadAfter),
			fmt.Sprintf("≤ %.0f MiB", TargetRSSMiB), met(m.r.RSSMiB <= TargetRSSMiB))
	}
	return b.String()
}

func (r Results) pluginPolicy() string {
	if r.PluginPolicy == "" {
		return "binpack"
	}
	return r.PluginPolicy
}

// pluginTarget is the b/a target of the plugin phase for its policy.
func (r Results) pluginTarget() float64 {
	if r.pluginPolicy() == "fgd" {
		return TargetPluginRatioWorkload
	}
	return TargetPluginRatio
}

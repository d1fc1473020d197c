package scale

import (
	"fmt"
	"strings"
)

// rowFunc writes one row of the results table: the figure, what was measured, the target
// and the verdict (met, missed or "").
type rowFunc = func(what, measured, target, verdict string)

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
	r.extenderThroughputMarkdown(row, dra)
	if r.Plugin != nil && !dra {
		r.pluginMarkdown(row)
	}
	r.draMarkdown(row)
	r.extenderFiguresMarkdown(row)
	r.burstMarkdown(row)
	r.memoryMarkdown(row)
	return b.String()
}

// extenderThroughputMarkdown is the rate of phase a (not with DRA) and of phase b with the
// extender, their ratio and their CPU per pod.
func (r Results) extenderThroughputMarkdown(row rowFunc, dra bool) {
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
}

// pluginMarkdown is phase b with gpushare-scheduler: its rate, its ratio to phase a, its
// CPU per pod, the alternating rounds and the cards it placed.
func (r Results) pluginMarkdown(row rowFunc) {
	p := r.Plugin
	row("b) gpushare-scheduler (plugin)", fmt.Sprintf("%.1f pods/s (%d pods in %.1f s; load %s → %s)",
		p.PodsPerSecond, p.Pods, p.Seconds, p.LoadBefore, p.LoadAfter), "", "")
	if r.Plain != nil && r.Plain.PodsPerSecond > 0 {
		ratio, target := p.PodsPerSecond/r.Plain.PodsPerSecond, r.pluginTarget()
		row("b/a (plugin, "+r.pluginPolicy()+")", fmt.Sprintf("%.2f", ratio), fmt.Sprintf("≥ %.2f", target), met(ratio >= target))
	}
	if r.Plain != nil && r.Plain.SchedulerCPUSeconds > 0 && p.SchedulerCPUSeconds > 0 {
		a := r.Plain.SchedulerCPUSeconds * 1e3 / float64(r.Plain.Pods)
		bp := p.SchedulerCPUSeconds * 1e3 / float64(p.Pods)
		row("CPU per pod: a) scheduler; b) gpushare-scheduler (plugin)", fmt.Sprintf("%.1f ms; %.1f ms (if CPU-bound, b/a = %.2f)", a, bp, a/bp), "", "")
	}
	if len(r.Rounds) > 1 {
		r.roundsMarkdown(row)
	}
	if c := p.Cards; c != nil {
		row("b) plugin: cards over capacity / unannotated", fmt.Sprintf("%d / %d", len(c.Over), len(c.Unannotated)), "0 / 0", met(len(c.Over) == 0 && len(c.Unannotated) == 0))
	}
}

// roundsMarkdown is the plugin's ratio to phase a in each alternating round, their median,
// and each round's CPU per pod.
func (r Results) roundsMarkdown(row rowFunc) {
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
		fmt.Sprintf("%s: **median %.2f**", strings.Join(byRound, ", "), m), fmt.Sprintf("≥ %.2f", target), met(m >= target))
	row("CPU per pod by round: a; b (ms)", strings.Join(cpu, " · "), "", "")
}

// extenderFiguresMarkdown is the extender's verb latencies, CPU and memory during phase b,
// and the cards it placed.
func (r Results) extenderFiguresMarkdown(row rowFunc) {
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
}

// burstMarkdown is the burst step: what was bound, the extender's calls, and how long
// until every pod was decided.
func (r Results) burstMarkdown(row rowFunc) {
	u := r.Burst
	if u == nil {
		return
	}
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

// memoryMarkdown is the extender's memory with the placed pods loaded by watch, and after
// a restart.
func (r Results) memoryMarkdown(row rowFunc) {
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
}

package scale

import (
	"fmt"
	"path/filepath"
	"strings"
)

// loadDRARound reads the DRA phases of round folder sub into rd, when they ran. Errors:
// malformed files.
func loadDRARound(sub string, rd *Round) error {
	var a, c PhaseResult
	okA, err := readJSON(filepath.Join(sub, FileDRA), &a)
	if err != nil {
		return err
	}
	okC, err := readJSON(filepath.Join(sub, FileDRAPlugin), &c)
	if err != nil {
		return err
	}
	if okA {
		rd.DRA = &a
	}
	if okC {
		rd.DRAPlugin = &c
	}
	return nil
}

// perPodMs is seconds of CPU over p's pods, in ms per pod.
func perPodMs(seconds float64, p *PhaseResult) float64 {
	return seconds * 1e3 / float64(max(p.Pods, 1))
}

// rate is p's pods/s; 0 for a phase that did not run.
func rate(p *PhaseResult) float64 {
	if p == nil {
		return 0
	}
	return p.PodsPerSecond
}

// ratio is num/den, 0 when either is missing.
func ratio(num, den float64) float64 {
	if num <= 0 || den <= 0 {
		return 0
	}
	return num / den
}

// draRatios are the DRA mode's ratios of one round or run, 0 where a phase is missing:
// AB = DRA via kube-scheduler / device plugin via gpushare-scheduler, APlain = DRA / gpu-mem
// both via kube-scheduler, CA = DRA via gpushare-scheduler / DRA via kube-scheduler.
type draRatios struct{ AB, APlain, CA float64 }

func ratiosOf(plain, plugin, draA, draC *PhaseResult) draRatios {
	return draRatios{
		AB:     ratio(rate(draA), rate(plugin)),
		APlain: ratio(rate(draA), rate(plain)),
		CA:     ratio(rate(draC), rate(draA)),
	}
}

// draMarkdown adds the DRA mode's rows: each DRA phase's rate, the ratios (per round with
// their median when there are rounds), CPU per pod of the scheduler and kube-apiserver of
// every phase, and the claims' check.
func (r Results) draMarkdown(row func(what, measured, target, verdict string)) {
	if r.DRA == nil && r.DRAPlugin == nil {
		return
	}
	if r.DRASetup != nil {
		row("ResourceSlices published (one per node, 8 devices)", fmt.Sprintf("%d (in %.1f s)", r.DRASetup.Nodes, r.DRASetup.Seconds), "", "")
	}
	phases := []struct {
		tag, label string
		p          *PhaseResult
	}{
		{"ref", "kube-scheduler alone, gpu-mem extended resource", r.Plain},
		{"a", "kube-scheduler alone, DRA claims", r.DRA},
		{"b", "gpushare-scheduler, gpu-mem extended resource", r.Plugin},
		{"c", "gpushare-scheduler, DRA claims", r.DRAPlugin},
	}
	for _, ph := range phases {
		p := ph.p
		if p == nil {
			continue
		}
		claims := ""
		if p.ClaimCreateSeconds > 0 {
			claims = fmt.Sprintf("; the claims created before, in %.1f s", p.ClaimCreateSeconds)
		}
		row(ph.tag+") "+ph.label, fmt.Sprintf("%.1f pods/s (%d pods in %.1f s%s; load %s → %s)",
			p.PodsPerSecond, p.Pods, p.Seconds, claims, p.LoadBefore, p.LoadAfter), "", "")
	}
	rt := ratiosOf(r.Plain, r.Plugin, r.DRA, r.DRAPlugin)
	ratioRow := func(what string, v float64, pick func(draRatios) float64) {
		if v <= 0 {
			return
		}
		measured := fmt.Sprintf("%.2f", v)
		if len(r.Rounds) > 1 {
			var vals []float64
			var byRound []string
			for _, rd := range r.Rounds {
				x := pick(ratiosOf(&rd.Plain, &rd.Plugin, rd.DRA, rd.DRAPlugin))
				if x > 0 {
					vals = append(vals, x)
					byRound = append(byRound, fmt.Sprintf("%.2f", x))
				}
			}
			if len(vals) > 1 {
				measured = fmt.Sprintf("%s: **median %.2f** (%d alternating rounds)", strings.Join(byRound, ", "), median(vals), len(vals))
			}
		}
		row(what, measured, "", "")
	}
	ratioRow("a/b: DRA via kube-scheduler / gpu-mem via gpushare-scheduler", rt.AB, func(d draRatios) float64 { return d.AB })
	ratioRow("a/ref: DRA / gpu-mem, both via kube-scheduler alone", rt.APlain, func(d draRatios) float64 { return d.APlain })
	ratioRow("c/a: DRA via gpushare-scheduler / via kube-scheduler", rt.CA, func(d draRatios) float64 { return d.CA })
	var cpu []string
	for _, ph := range phases {
		if p := ph.p; p != nil && p.SchedulerCPUSeconds > 0 {
			s := fmt.Sprintf("%s %.1f", ph.tag, perPodMs(p.SchedulerCPUSeconds, p))
			if p.APIServerCPUSeconds > 0 {
				s += fmt.Sprintf(" + %.1f", perPodMs(p.APIServerCPUSeconds, p))
			}
			cpu = append(cpu, s)
		}
	}
	if len(cpu) > 0 {
		row("CPU per pod: scheduler + kube-apiserver (ms), last round", strings.Join(cpu, "; "), "", "")
	}
	if p := r.Plugin; p != nil && p.Cards != nil {
		c := p.Cards
		row("b) cards over capacity / unannotated", fmt.Sprintf("%d / %d (on %d nodes)", len(c.Over), len(c.Unannotated), c.Nodes), "0 / 0", met(len(c.Over) == 0 && len(c.Unannotated) == 0))
	}
	for _, ph := range phases {
		if p := ph.p; p != nil && p.Claims != nil {
			c := p.Claims
			row(ph.tag+") claims: cards over capacity / unallocated / mismatched",
				fmt.Sprintf("%d / %d / %d (%d claims on %d nodes)", len(c.Over), len(c.Unallocated), len(c.Mismatched), c.Claims, c.Nodes),
				"0 / 0 / 0", met(c.OK()))
		}
	}
}

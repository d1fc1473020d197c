package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gpushare/gpushare/internal/bench/metrics"
	"github.com/gpushare/gpushare/internal/bench/scale"
)

// run runs one step of the benchmark, writing its result into --out.
func run(ctx context.Context, step string, o *options) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", o.out, err)
	}
	if step == "report" {
		return report(o)
	}
	b, err := o.bench()
	if err != nil {
		return err
	}
	switch step {
	case "setup":
		r, err := b.Setup(ctx, o.nodes)
		return o.save(scale.FileSetup, r, err)
	case "dra-setup":
		r, err := b.PublishDRA(ctx, o.nodes)
		return o.save(scale.FileDRASetup, r, err)
	case "phase":
		return runPhase(ctx, b, o)
	case "delete":
		if o.set == "" {
			return fmt.Errorf("delete needs --set")
		}
		return b.DeleteSet(ctx, o.set, o.timeout)
	case "burst":
		return runBurst(ctx, b, o)
	case "memory", "footprint":
		return runMemory(ctx, b, o, step == "footprint")
	}
	return fmt.Errorf("unknown step %q (setup, dra-setup, phase, delete, burst, memory, footprint, report)", step)
}

// report writes the Markdown report of the results in --out, and prints it.
func report(o *options) error {
	r, err := scale.LoadResults(o.out)
	if err != nil {
		return err
	}
	r.PluginPolicy = o.pluginPolicy
	md := r.Markdown()
	fmt.Print(md)
	return os.WriteFile(filepath.Join(o.out, scale.FileReportMarkdown), []byte(md), 0o644)
}

// save writes v as JSON to the file name in --out, unless the step failed (err).
func (o *options) save(name string, v any, err error) error {
	if err != nil {
		return err
	}
	return scale.WriteJSON(filepath.Join(o.out, name), v)
}

// probe reads the extender's metrics and CPU. Errors: step runs without --metrics-url and
// --extender-pid, or the metrics client cannot be built.
func (o *options) probe(step string) (*scale.ExtenderProbe, error) {
	if o.metricsURL == "" || o.extenderPID <= 0 {
		return nil, fmt.Errorf("step %s needs --metrics-url and --extender-pid", step)
	}
	client, err := metrics.NewClient(time.Minute, o.metricsTLS)
	if err != nil {
		return nil, err
	}
	return &scale.ExtenderProbe{MetricsURL: o.metricsURL, PID: o.extenderPID, HTTP: client}, nil
}

// runPhase places the pods of --set (step phase).
func runPhase(ctx context.Context, b *scale.Bench, o *options) error {
	var p *scale.ExtenderProbe
	switch o.set {
	case "":
		return fmt.Errorf("phase needs --set")
	case scale.SetPlain, scale.SetDRA:
	case scale.SetPlugin, scale.SetDRAPlugin:
		// gpushare-scheduler is the only process of phase b: its CPU comes from
		// --scheduler-pid-file, its cards from the pods' annotations.
		if o.schedName == "" {
			return fmt.Errorf("phase --set %s needs --scheduler-name (the pods must reach gpushare-scheduler)", o.set)
		}
	default:
		var err error
		if p, err = o.probe("phase"); err != nil {
			return err
		}
	}
	r, err := b.RunPhase(ctx, o.set, o.pods, o.timeout, p, o.schedulerPID())
	return o.save(o.set+".json", r, err)
}

// runBurst creates a burst of pods at once (step burst); with --metrics-url it also reads
// the extender.
func runBurst(ctx context.Context, b *scale.Bench, o *options) error {
	var p *scale.ExtenderProbe
	if o.metricsURL != "" {
		var err error
		if p, err = o.probe("burst"); err != nil {
			return err
		}
	}
	r, err := b.RunBurst(ctx, o.burstPods, o.burstUnits, o.timeout, o.settle, p)
	return o.save(scale.FileBurst, r, err)
}

// runMemory measures the extender's memory (step memory) or its footprint after a restart
// (step footprint).
func runMemory(ctx context.Context, b *scale.Bench, o *options, footprint bool) error {
	step := "memory"
	if footprint {
		step = "footprint"
	}
	p, err := o.probe(step)
	if err != nil {
		return err
	}
	if footprint {
		r, err := b.Footprint(ctx, o.nodes, o.placed, p)
		return o.save(scale.FileMemoryRestart, r, err)
	}
	r, err := b.RunMemory(ctx, o.nodes, o.placed, p, o.timeout, o.settle)
	return o.save(scale.FileMemory, r, err)
}

package scale

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/internal/bench/metrics"
	"github.com/gpushare/gpushare/internal/bench/parallel"
)

// phasePods is how RunPhase builds pod i of set name: through gpu-mem, or with DRA
// through a claim it creates now, before the timing starts (res.ClaimCreateSeconds): it
// measures scheduling, and a ResourceClaimTemplate's claim would be made by
// kube-controller-manager, not here. Errors: claims that cannot be created.
func (b *Bench) phasePods(ctx context.Context, name string, shapes []PodShape, res *PhaseResult) (func(set string, i int, s PodShape) *corev1.Pod, error) {
	if !b.Objects.DRA {
		return b.Objects.Pod, nil
	}
	klog.InfoS("creating resource claims", "set", name, "count", len(shapes), "workers", b.workers())
	t := time.Now()
	if err := b.createClaims(ctx, name, shapes); err != nil {
		return nil, err
	}
	res.ClaimCreateSeconds = time.Since(t).Seconds()
	return b.Objects.DRAPod, nil
}

// createAndWait creates the pods of set name with Workers concurrent requests and waits
// until every one is bound, recording the creation time, the phase's time and rate and
// the load after it in res. Errors: API failures, pods still unbound after timeout.
func (b *Bench) createAndWait(ctx context.Context, w *podWatch, name string, shapes []PodShape, pod func(string, int, PodShape) *corev1.Pod, timeout time.Duration, res *PhaseResult) error {
	n := len(shapes)
	klog.InfoS("creating pods", "set", name, "count", n, "workers", b.workers())
	start := time.Now()
	err := parallel.ForEach(ctx, n, b.workers(), func(ctx context.Context, i int) error {
		return b.createPod(ctx, pod(name, i, shapes[i]))
	})
	if err != nil {
		return err
	}
	res.CreateSeconds = time.Since(start).Seconds()
	c, err := w.waitFor(ctx, "every pod of "+name+" bound", timeout, func(c counts) bool { return c.Bound >= n })
	if err != nil {
		return err
	}
	res.Seconds = c.LastBound.Sub(start).Seconds()
	res.PodsPerSecond = float64(n) / res.Seconds
	res.LoadAfter = loadAvg()
	return nil
}

// cpuMark is the CPU time of the scheduler (pid > 0) and the API server (apiPID > 0) at
// the start of a phase.
type cpuMark struct {
	pid, apiPID int
	sched, api  ProcStats
}

// startCPU reads the CPU time of the scheduler of schedulerPID (0: not measured) and of
// the API server (Bench.APIServerPID). Errors: a process that cannot be read.
func (b *Bench) startCPU(schedulerPID int) (cpuMark, error) {
	m := cpuMark{pid: schedulerPID, apiPID: b.APIServerPID}
	var err error
	if m.pid > 0 {
		if m.sched, err = readProc(m.pid); err != nil {
			return m, err
		}
	}
	if m.apiPID > 0 {
		if m.api, err = readProc(m.apiPID); err != nil {
			return m, err
		}
	}
	return m, nil
}

// finish records in res the CPU seconds each measured process used since m.
func (m cpuMark) finish(res *PhaseResult) error {
	if m.pid > 0 {
		after, err := readProc(m.pid)
		if err != nil {
			return err
		}
		res.SchedulerCPUSeconds = after.CPUSeconds - m.sched.CPUSeconds
	}
	if m.apiPID > 0 {
		after, err := readProc(m.apiPID)
		if err != nil {
			return err
		}
		res.APIServerCPUSeconds = after.CPUSeconds - m.api.CPUSeconds
	}
	return nil
}

// extenderMark is the extender's metrics and process figures at one moment.
type extenderMark struct {
	scrape metrics.Scrape
	proc   ProcStats
}

// readExtender reads the extender's metrics and process figures through probe.
func readExtender(ctx context.Context, probe *ExtenderProbe) (extenderMark, error) {
	s, p, err := probe.read(ctx)
	return extenderMark{scrape: s, proc: p}, err
}

// extenderFigures are the extender's verb latencies and CPU time between before and
// after, and its memory at after.
func extenderFigures(before, after extenderMark) *ExtenderFigures {
	return &ExtenderFigures{
		Filter:       metrics.Between(before.scrape, after.scrape, metrics.FilterSeconds),
		Prioritize:   metrics.Between(before.scrape, after.scrape, metrics.PrioritizeSeconds),
		Bind:         metrics.Between(before.scrape, after.scrape, metrics.BindSeconds),
		CPUSeconds:   after.proc.CPUSeconds - before.proc.CPUSeconds,
		RSSMiB:       mib(after.proc.RSSBytes),
		HWMMiB:       mib(after.proc.HWMBytes),
		HeapInuseMiB: after.scrape.Values[metrics.HeapInuse] / (1 << 20),
	}
}

// checkPhase checks the cards a placer chose for the set's pods (with a probe, or with
// pods for a second scheduler): from the allocation annotations, or with DRA from the
// claims. kube-scheduler alone binds device-plugin pods without choosing cards: nothing to
// check then. Errors: API failures, annotations that cannot be read.
func (b *Bench) checkPhase(ctx context.Context, w *podWatch, name string, probed bool, res *PhaseResult) error {
	if !probed && b.Objects.SchedulerName == "" && !b.Objects.DRA {
		return nil
	}
	pods, err := w.pods()
	if err != nil {
		return err
	}
	if b.Objects.DRA {
		claims, err := b.setClaims(ctx, name)
		if err != nil {
			return err
		}
		cc := checkClaims(pods, claims, b.Objects.CardUnits*unitBytes())
		res.Claims = &cc
		return nil
	}
	cards, err := checkCards(b.Objects.Resources, pods, b.Objects.CardUnits)
	if err != nil {
		return err
	}
	res.Cards = &cards
	return nil
}

package scale

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/internal/bench/metrics"
)

// ExtenderProbe says where to read the extender's figures; nil in the plain phase.
type ExtenderProbe struct {
	MetricsURL string // e.g. http://127.0.0.1:32345/metrics
	PID        int    // the extender process (RSS and CPU from /proc)
	HTTP       *http.Client
}

func (p *ExtenderProbe) read(ctx context.Context) (metrics.Scrape, ProcStats, error) {
	client := p.HTTP
	if client == nil {
		client = &http.Client{Timeout: time.Minute}
	}
	s, err := metrics.Get(ctx, client, p.MetricsURL)
	if err != nil {
		return metrics.Scrape{}, ProcStats{}, err
	}
	ps, err := readProc(p.PID)
	if err != nil {
		return metrics.Scrape{}, ProcStats{}, err
	}
	return s, ps, nil
}

// ExtenderFigures is what the extender reported about itself during a phase.
type ExtenderFigures struct {
	Filter     metrics.Latency `json:"filter"`
	Prioritize metrics.Latency `json:"prioritize"`
	Bind       metrics.Latency `json:"bind"`
	// CPUSeconds is the extender's user+system CPU time used during the phase.
	CPUSeconds float64 `json:"cpuSeconds"`
	// RSSMiB is its resident set at the end of the phase, HWMMiB its peak since start.
	RSSMiB       float64 `json:"rssMiB"`
	HWMMiB       float64 `json:"hwmMiB"`
	HeapInuseMiB float64 `json:"heapInuseMiB"`
}

// PhaseResult is one scheduling phase.
type PhaseResult struct {
	Name string `json:"name"`
	Pods int    `json:"pods"`
	// CreateSeconds: first create request to the last create answered.
	CreateSeconds float64 `json:"createSeconds"`
	// Seconds: first create request to the last pod seen bound.
	Seconds       float64 `json:"seconds"`
	PodsPerSecond float64 `json:"podsPerSecond"`
	// SchedulerCPUSeconds is the scheduler's CPU time during the phase (kube-scheduler, or
	// gpushare-scheduler in the plugin phase; 0: not measured).
	// On a shared machine CPU per pod is steadier than pods/s.
	SchedulerCPUSeconds float64 `json:"schedulerCPUSeconds"`
	// APIServerCPUSeconds is kube-apiserver's CPU time during the phase (0: not measured).
	APIServerCPUSeconds float64 `json:"apiserverCPUSeconds,omitempty"`
	// ClaimCreateSeconds is how long creating the pods' ResourceClaims took, before the
	// timing started (DRA sets only).
	ClaimCreateSeconds float64          `json:"claimCreateSeconds,omitempty"`
	LoadBefore         string           `json:"loadBefore"`
	LoadAfter          string           `json:"loadAfter"`
	Extender           *ExtenderFigures `json:"extender,omitempty"`
	Cards              *CardCheck       `json:"cards,omitempty"`
	// Claims is the check of a DRA set's claims (nil for device-plugin sets).
	Claims *ClaimCheck `json:"claims,omitempty"`
}

// RunPhase creates podSet(n) as set `name` with Workers concurrent requests and waits
// until every pod is bound. With schedulerPID > 0 it measures that scheduler's CPU time
// (kube-scheduler, or gpushare-scheduler). With a probe it also diffs the extender's metrics
// and CPU time over the phase. With a probe or pods for a second scheduler
// (Objects.SchedulerName), a placer of cards, it checks the cards from the allocation
// annotations. The set must be
// empty at the start. Errors: API failures, pods still unbound after timeout, probe errors.
func (b *Bench) RunPhase(ctx context.Context, name string, n int, timeout time.Duration, probe *ExtenderProbe, schedulerPID int) (PhaseResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := PhaseResult{Name: name, Pods: n, LoadBefore: loadAvg()}
	w, err := b.watchSet(ctx, name)
	if err != nil {
		return res, err
	}
	if c := w.snapshot(); c.Present > 0 {
		return res, fmt.Errorf("set %s already has %d pods; delete them first", name, c.Present)
	}
	var before extenderMark
	if probe != nil {
		if before, err = readExtender(ctx, probe); err != nil {
			return res, err
		}
	}
	shapes := podSet(n)
	pod, err := b.phasePods(ctx, name, shapes, &res)
	if err != nil {
		return res, err
	}
	// CPU is counted from here, as the rate: the claims made before are not scheduling.
	cpu, err := b.startCPU(schedulerPID)
	if err != nil {
		return res, err
	}
	if err := b.createAndWait(ctx, w, name, shapes, pod, timeout, &res); err != nil {
		return res, err
	}
	if err := cpu.finish(&res); err != nil {
		return res, err
	}
	klog.InfoS("phase done", "set", name, "pods", n, "seconds", res.Seconds, "podsPerSecond", res.PodsPerSecond)
	if probe != nil {
		after, err := readExtender(ctx, probe)
		if err != nil {
			return res, err
		}
		res.Extender = extenderFigures(before, after)
	}
	return res, b.checkPhase(ctx, w, name, probe != nil, &res)
}

// DeleteSet deletes every pod of the set (grace 0: no kubelet would confirm), waits until
// none is left, then deletes the set's resource claims (deleteClaims). Errors: API
// failures, pods left after timeout.
func (b *Bench) DeleteSet(ctx context.Context, set string, timeout time.Duration) error {
	pods := b.Client.CoreV1().Pods(b.Objects.Namespace)
	sel := metav1.ListOptions{LabelSelector: LabelSet + "=" + set}
	var zero int64
	deadline := time.Now().Add(timeout)
	for {
		// A large collection may outlive one request's timeout: repeat until empty.
		err := pods.DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, sel)
		if err != nil {
			klog.InfoS("deleting pods (will retry)", "set", set, "err", err)
		}
		left, err := pods.List(ctx, metav1.ListOptions{LabelSelector: sel.LabelSelector, Limit: 1})
		if err != nil {
			return fmt.Errorf("listing pods of set %s: %w", set, err)
		}
		if len(left.Items) == 0 {
			klog.InfoS("pods deleted", "set", set)
			return b.deleteClaims(ctx, set)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pods of set %s still there after %s", set, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// loadAvg is the first three fields of /proc/loadavg ("" when unreadable): the machine is
// shared, so every figure is reported beside it.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

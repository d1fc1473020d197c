package watchdog

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/cgroups"
	"github.com/gpushare/gpushare/pkg/gpushare"
)

// Watchdog is share-plugin's usage watchdog: every Interval it lists the cards' processes
// (sample), judges each container against its grant, acts on those that stay over, exports
// the figures as metrics and publishes them on the node (gpushare.AnnotationNodeUsage) for
// kubectl inspect gpushare -d. It enforces nothing by itself: only OverGrantEvict touches
// a workload.
type Watchdog struct {
	cfg     Config
	ledger  Ledger
	byIndex map[int]gpushare.Device
	procs   cgroups.Reader
	// overGrant counts episodes: per namespace, not per pod. A counter is read through
	// increase() over time, and a pod's series would carry one increment before the pod,
	// and so the series, goes; the per-container detail is on the gauges and in the event.
	overGrant *prometheus.CounterVec
	// mpsEscapes counts processes that bypass MPS on an MPS node, per namespace and card
	// for the same reason: the pod and container are in the event and the log.
	mpsEscapes *prometheus.CounterVec

	// Owned by the run goroutine (or a test calling step).
	episodes    map[usageKey]*episode
	published   *gpushare.Usage // last value written to the node
	publishedAt time.Time
	nvmlFailing map[int]bool
	// utilUnsupported holds the cards that report no per-process utilisation (logged once);
	// utilFailing those whose last read failed (logged once per streak).
	utilUnsupported map[int]bool
	utilFailing     map[int]bool
	warnedNoProc    bool
	// unclaimedReported is when each pod's use of a card without a grant was last reported.
	unclaimedReported map[podCard]time.Time
	exempt            map[string]bool // Unclaimed.ExemptNamespaces
	// escapes are the processes outside MPS reported, by escape; acted as for episodes.
	escapes map[escapeKey]*episode
	// mpsBlind holds the cards on which NVML does not tell MPS clients apart (logged once).
	mpsBlind map[int]bool
	// isolation is the node's gpushare.LabelIsolation as last read, at isolationReadAt
	// (zero: never); isolationInvalid: the label's value was invalid (logged once);
	// isolationFailing: the last read failed (logged once).
	isolation        gpushare.Isolation
	isolationReadAt  time.Time
	isolationInvalid bool
	isolationFailing bool

	mu   sync.Mutex   // guards last
	last *usageSample // read by the metrics collector
}

// episode is a stretch of samples in which one container stays over its grant on one card.
type episode struct {
	since    time.Time
	reported bool // event sent, counter incremented
	acted    bool // the action succeeded (or there is none)
}

// New returns a watchdog over the node's cards that reads what each pod holds from ledger.
// It starts nothing; call Run.
func New(cfg Config, ledger Ledger) *Watchdog {
	byIndex := make(map[int]gpushare.Device, len(cfg.Cards))
	for _, c := range cfg.Cards {
		byIndex[c.Index] = c
	}
	exempt := map[string]bool{}
	for _, ns := range cfg.Unclaimed.ExemptNamespaces {
		exempt[ns] = true
	}
	return &Watchdog{
		cfg:     cfg,
		ledger:  ledger,
		byIndex: byIndex,
		procs:   cgroups.Reader{ProcRoot: cfg.ProcRoot},
		overGrant: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpushare_container_over_grant_total",
			Help: "Episodes of a container staying above its GPU memory grant on a card for the grace period, by the pod's namespace.",
		}, []string{"node", "namespace"}),
		mpsEscapes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpushare_mps_escapes_total",
			Help: "Processes holding a context of their own on a card of a node labelled gpushare.io/isolation=mps, outside the card's MPS server, so no MPS memory limit holds them: one per container and card for a pod's process, per process and card for others; by the pod's namespace (empty for none) and reason (pod: a tenant's pod, evented and acted on; exempt: a pod of an exempt namespace; host: a process of no pod; unknown: one whose pod cannot be told).",
		}, []string{"node", "namespace", "card", "reason"}),
		episodes:          map[usageKey]*episode{},
		escapes:           map[escapeKey]*episode{},
		mpsBlind:          map[int]bool{},
		nvmlFailing:       map[int]bool{},
		utilUnsupported:   map[int]bool{},
		utilFailing:       map[int]bool{},
		unclaimedReported: map[podCard]time.Time{},
		exempt:            exempt,
	}
}

// Run samples every Interval until ctx is done.
func (w *Watchdog) Run(ctx context.Context) {
	tick := w.cfg.Clock.NewTicker(w.cfg.Interval)
	defer tick.Stop()
	klog.InfoS("GPU memory usage watchdog started", "interval", w.cfg.Interval, "threshold", w.cfg.OverGrant.Threshold,
		"grace", w.cfg.OverGrant.Grace, "action", w.cfg.OverGrant.Action, "mpsEscapeAction", w.cfg.OverGrant.mpsEscapeAction())
	for {
		w.step(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
	}
}

// step takes one sample, judges it, and publishes it. On a node labelled
// gpushare.io/isolation=mps the sample holds the processes that bypass MPS too.
func (w *Watchdog) step(ctx context.Context) {
	s := w.sample(w.mpsNode(ctx, w.cfg.Clock.Now()))
	w.mu.Lock()
	w.last = &s
	w.mu.Unlock()
	evicted := map[types.UID]bool{} // one eviction per pod and sample
	w.judge(ctx, s, evicted)
	w.judgeEscapes(ctx, s, evicted)
	w.reportUnclaimed(s)
	w.publish(ctx, s)
}

// publish writes the sample to the node's usage annotation when it differs from the last
// one written by at least one memory unit somewhere, or Resync has passed since; so at
// most once per Interval. A failed write is retried at the next sample.
func (w *Watchdog) publish(ctx context.Context, s usageSample) {
	var cards []gpushare.Device
	for _, c := range w.cfg.Cards {
		if s.listed[c.Index] {
			cards = append(cards, c)
		}
	}
	u := s.usageAnnotation(cards)
	if w.published != nil && !usageChanged(*w.published, u, w.cfg.Unit.MiB) && s.at.Sub(w.publishedAt) < w.cfg.Resync {
		return
	}
	v, err := u.Marshal()
	if err != nil {
		klog.ErrorS(err, "GPU usage not published")
		return
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{gpushare.AnnotationNodeUsage: v}}})
	if err != nil {
		return
	}
	node, err := w.cfg.Client.CoreV1().Nodes().Patch(ctx, w.cfg.NodeName, types.MergePatchType, body, metav1.PatchOptions{})
	if err != nil {
		klog.ErrorS(err, "Publishing GPU usage on the node failed; will retry", "node", w.cfg.NodeName)
		return
	}
	w.published, w.publishedAt = &u, s.at
	w.noteIsolation(node, s.at) // the patch's answer is a read of the node too
}

// nvmlFailed logs a card's failed process listing once per failure streak.
func (w *Watchdog) nvmlFailed(index int, err error) {
	if !w.nvmlFailing[index] {
		klog.ErrorS(err, "Listing a card's processes failed; its usage is not judged until it answers", "index", index)
	}
	w.nvmlFailing[index] = true
}

func (w *Watchdog) nvmlAnswered(index int) {
	if w.nvmlFailing[index] {
		klog.InfoS("Listing a card's processes works again", "index", index)
	}
	delete(w.nvmlFailing, index)
}

package deviceplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/cgroups"
	"github.com/gpushare/gpushare/pkg/gpushare"
)

// OverGrantAction is what the usage watchdog does, beyond its event and counter, about a
// container that stays above its grant.
type OverGrantAction string

const (
	// OverGrantNone: the event and the counter only.
	OverGrantNone OverGrantAction = "none"
	// OverGrantAnnotate: also gpushare.AnnotationOverGrant on the pod, once per episode.
	OverGrantAnnotate OverGrantAction = "annotate"
	// OverGrantEvict: also evict the pod through the Eviction API (PodDisruptionBudgets
	// apply; a refusal is retried at the next interval while the container stays over).
	OverGrantEvict OverGrantAction = "evict"
)

// ParseOverGrantAction reads --over-grant-action.
func ParseOverGrantAction(s string) (OverGrantAction, error) {
	switch a := OverGrantAction(s); a {
	case OverGrantNone, OverGrantAnnotate, OverGrantEvict:
		return a, nil
	}
	return "", fmt.Errorf("over-grant action %q: want %s, %s or %s", s, OverGrantNone, OverGrantAnnotate, OverGrantEvict)
}

// MaxOverGrantThreshold bounds --over-grant-threshold: above 10 (eleven times the grant)
// the watchdog would report nothing worth the name.
const MaxOverGrantThreshold = 10

// OverGrant configures the usage watchdog's judgement (Config.OverGrant).
type OverGrant struct {
	// Threshold is the fraction above the grant a container may use: over when used >
	// granted × (1 + Threshold). 0 ≤ Threshold ≤ MaxOverGrantThreshold.
	Threshold float64
	// Grace is how long a container must stay over before the event and the action; 0: at
	// the first sample over.
	Grace time.Duration
	// Action is what follows the event (default OverGrantNone).
	Action OverGrantAction
}

func (o *OverGrant) validate() error {
	switch {
	case math.IsNaN(o.Threshold) || o.Threshold < 0 || o.Threshold > MaxOverGrantThreshold:
		return fmt.Errorf("over-grant threshold %v: want a fraction 0..%d (0.05 is 5%% above the grant)", o.Threshold, MaxOverGrantThreshold)
	case o.Grace < 0:
		return fmt.Errorf("over-grant grace %v is negative", o.Grace)
	}
	if o.Action == "" {
		o.Action = OverGrantNone
	}
	_, err := ParseOverGrantAction(string(o.Action))
	return err
}

// watchdog is the plugin's usage watchdog: every UsageInterval it lists the cards'
// processes (sampleUsage), judges each container against its grant, acts on those that
// stay over, exports the figures as metrics and publishes them on the node
// (gpushare.AnnotationNodeUsage) for kubectl inspect gpushare -d. It enforces nothing by
// itself: only OverGrantEvict touches a workload.
type watchdog struct {
	p     *Plugin
	procs cgroups.Reader
	// overGrant counts episodes: per namespace, not per pod. A counter is read through
	// increase() over time, and a pod's series would carry one increment before the pod,
	// and so the series, goes; the per-container detail is on the gauges and in the event.
	overGrant *prometheus.CounterVec

	// Owned by the run goroutine (or a test calling step).
	episodes     map[usageKey]*episode
	published    *gpushare.Usage // last value written to the node
	publishedAt  time.Time
	nvmlFailing  map[int]bool
	warnedNoProc bool

	mu   sync.Mutex   // guards last
	last *usageSample // read by the metrics collector
}

// episode is a stretch of samples in which one container stays over its grant on one card.
type episode struct {
	since    time.Time
	reported bool // event sent, counter incremented
	acted    bool // the action succeeded (or there is none)
}

func newWatchdog(p *Plugin) *watchdog {
	return &watchdog{
		p:     p,
		procs: cgroups.Reader{ProcRoot: p.cfg.ProcRoot},
		overGrant: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpushare_container_over_grant_total",
			Help: "Episodes of a container staying above its GPU memory grant on a card for the grace period, by the pod's namespace.",
		}, []string{"node", "namespace"}),
		episodes:    map[usageKey]*episode{},
		nvmlFailing: map[int]bool{},
	}
}

// run samples every UsageInterval until ctx is done.
func (w *watchdog) run(ctx context.Context) {
	tick := w.p.cfg.Clock.NewTicker(w.p.cfg.UsageInterval)
	defer tick.Stop()
	klog.InfoS("GPU memory usage watchdog started", "interval", w.p.cfg.UsageInterval, "threshold", w.p.cfg.OverGrant.Threshold,
		"grace", w.p.cfg.OverGrant.Grace, "action", w.p.cfg.OverGrant.Action)
	for {
		w.step(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
	}
}

// step takes one sample, judges it, and publishes it.
func (w *watchdog) step(ctx context.Context) {
	s := w.p.sampleUsage()
	w.mu.Lock()
	w.last = &s
	w.mu.Unlock()
	w.judge(ctx, s)
	w.publish(ctx, s)
}

// judge opens, continues and closes episodes, and after Grace over reports each episode
// once (event, counter) and acts on it until the action succeeds. Containers of cards NVML
// did not list this time keep their episode as it is.
func (w *watchdog) judge(ctx context.Context, s usageSample) {
	cfg := w.p.cfg.OverGrant
	evicted := map[types.UID]bool{}
	for key, u := range s.ctrs {
		if !s.listed[key.card] || u.pod.DeletionTimestamp != nil {
			continue // a terminating pod is going anyway
		}
		if !u.over(cfg.Threshold) {
			delete(w.episodes, key)
			continue
		}
		ep := w.episodes[key]
		if ep == nil {
			ep = &episode{since: s.at}
			w.episodes[key] = ep
		}
		if s.at.Sub(ep.since) < cfg.Grace {
			continue
		}
		if !ep.reported {
			ep.reported = true
			w.overGrant.WithLabelValues(w.p.cfg.NodeName, u.pod.Namespace).Inc()
			w.p.cfg.Recorder.Eventf(u.pod, corev1.EventTypeWarning, gpushare.EventGPUMemoryOverGrant,
				"Container %q uses %d MiB of GPU memory on card %s, above its grant of %d MiB (threshold %.4g%%), for %s%s",
				u.container, u.used>>20, u.card.UUID, u.granted>>20, cfg.Threshold*100, s.at.Sub(ep.since).Round(time.Second), actionNote(cfg.Action))
			klog.InfoS("Container over its GPU memory grant", "pod", klog.KObj(u.pod), "container", u.container, "card", u.card.UUID,
				"usedMiB", u.used>>20, "grantedMiB", u.granted>>20, "since", ep.since, "action", cfg.Action)
		}
		if !ep.acted {
			ep.acted = w.act(ctx, u, ep, evicted)
		}
	}
	for key := range w.episodes {
		if _, ok := s.ctrs[key]; !ok {
			delete(w.episodes, key)
		}
	}
}

func actionNote(a OverGrantAction) string {
	switch a {
	case OverGrantAnnotate:
		return "; share-plugin records it in the pod annotation " + gpushare.AnnotationOverGrant
	case OverGrantEvict:
		return "; share-plugin evicts the pod"
	}
	return ""
}

// act carries out the action for one over-grant episode and reports whether it is done.
// Failures are logged; the caller tries again at the next sample while the episode lasts.
func (w *watchdog) act(ctx context.Context, u *ctrUsage, ep *episode, evicted map[types.UID]bool) bool {
	pods := w.p.cfg.Client.CoreV1().Pods(u.pod.Namespace)
	switch w.p.cfg.OverGrant.Action {
	case OverGrantAnnotate:
		v, err := json.Marshal(gpushare.OverGrant{Container: u.container, Card: u.card.UUID,
			UsedMiB: int64(u.used >> 20), GrantedMiB: int64(u.granted >> 20), Since: ep.since.UTC().Truncate(time.Second)})
		if err != nil {
			return false
		}
		// The UID precondition keeps a re-created pod of the same name untouched.
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": u.pod.UID,
			"annotations": map[string]string{gpushare.AnnotationOverGrant: string(v)}}})
		if err != nil {
			return false
		}
		if _, err := pods.Patch(ctx, u.pod.Name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				return true // the pod is gone or replaced
			}
			klog.ErrorS(err, "Annotating a pod over its GPU memory grant failed; will retry", "pod", klog.KObj(u.pod))
			return false
		}
		return true
	case OverGrantEvict:
		if evicted[u.pod.UID] {
			return true
		}
		uid := u.pod.UID
		err := pods.EvictV1(ctx, &policyv1.Eviction{
			ObjectMeta:    metav1.ObjectMeta{Name: u.pod.Name, Namespace: u.pod.Namespace},
			DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}},
		})
		switch {
		case err == nil:
			evicted[uid] = true
			klog.InfoS("Evicted a pod over its GPU memory grant", "pod", klog.KObj(u.pod), "container", u.container, "card", u.card.UUID)
			return true
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			return true
		case apierrors.IsTooManyRequests(err):
			klog.InfoS("Eviction of a pod over its GPU memory grant refused (a PodDisruptionBudget allows no disruption now); will retry",
				"pod", klog.KObj(u.pod), "err", err)
		default:
			klog.ErrorS(err, "Evicting a pod over its GPU memory grant failed; will retry", "pod", klog.KObj(u.pod))
		}
		return false
	}
	return true
}

// publish writes the sample to the node's usage annotation when it differs from the last
// one written by at least one memory unit somewhere, or NodeResync has passed since; so at
// most once per UsageInterval. A failed write is retried at the next sample.
func (w *watchdog) publish(ctx context.Context, s usageSample) {
	var cards []gpushare.Device
	for _, c := range w.p.cards.list {
		if s.listed[c.Index] {
			cards = append(cards, c)
		}
	}
	u := s.usageAnnotation(cards)
	if w.published != nil && !usageChanged(*w.published, u, w.p.cfg.Unit.MiB) && s.at.Sub(w.publishedAt) < w.p.cfg.NodeResync {
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
	if _, err := w.p.cfg.Client.CoreV1().Nodes().Patch(ctx, w.p.cfg.NodeName, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		klog.ErrorS(err, "Publishing GPU usage on the node failed; will retry", "node", w.p.cfg.NodeName)
		return
	}
	w.published, w.publishedAt = &u, s.at
}

// nvmlFailed logs a card's failed process listing once per failure streak.
func (w *watchdog) nvmlFailed(index int, err error) {
	if !w.nvmlFailing[index] {
		klog.ErrorS(err, "Listing a card's processes failed; its usage is not judged until it answers", "index", index)
	}
	w.nvmlFailing[index] = true
}

func (w *watchdog) nvmlAnswered(index int) {
	if w.nvmlFailing[index] {
		klog.InfoS("Listing a card's processes works again", "index", index)
	}
	delete(w.nvmlFailing, index)
}

package watchdog

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// judge opens, continues and closes episodes, and after Grace over reports each episode
// once (event, counter) and acts on it until the action succeeds. Containers of cards NVML
// did not list this time keep their episode as it is.
func (w *Watchdog) judge(ctx context.Context, s usageSample, evicted map[types.UID]bool) {
	cfg := w.cfg.OverGrant
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
			w.overGrant.WithLabelValues(w.cfg.NodeName, u.pod.Namespace).Inc()
			w.cfg.Recorder.Eventf(u.pod, corev1.EventTypeWarning, gpushare.EventGPUMemoryOverGrant,
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
func (w *Watchdog) act(ctx context.Context, u *ctrUsage, ep *episode, evicted map[types.UID]bool) bool {
	const why = "over its GPU memory grant"
	switch w.cfg.OverGrant.Action {
	case OverGrantAnnotate:
		return w.annotatePod(ctx, u.pod, gpushare.AnnotationOverGrant, gpushare.OverGrant{Container: u.container, Card: u.card.UUID,
			UsedMiB: int64(u.used >> 20), GrantedMiB: int64(u.granted >> 20), Since: ep.since.UTC().Truncate(time.Second)}, why)
	case OverGrantEvict:
		return w.evictPod(ctx, u.pod, evicted, why, "container", u.container, "card", u.card.UUID)
	}
	return true
}

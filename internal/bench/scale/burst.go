package scale

import (
	"context"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/internal/bench/metrics"
	"github.com/gpushare/gpushare/internal/bench/parallel"
)

// BurstResult is the burst-safety check on BurstNode.
type BurstResult struct {
	Pods          int   `json:"pods"`
	Units         int64 `json:"units"`
	WantBound     int   `json:"wantBound"`
	Bound         int   `json:"bound"`
	Unschedulable int   `json:"unschedulable"`
	// DecidedSeconds: first create to the moment every pod was bound or Unschedulable.
	DecidedSeconds float64   `json:"decidedSeconds"`
	Cards          CardCheck `json:"cards"`
	LoadAfter      string    `json:"loadAfter"`
	// Extender calls during the burst (nil without a probe): failed binds are the
	// pods whose card choice lost a race and went back to the queue.
	Filter      *metrics.Latency `json:"filter,omitempty"`
	Bind        *metrics.Latency `json:"bind,omitempty"`
	BindsFailed float64          `json:"bindsFailed"`
	// OK: Bound == WantBound, the rest unschedulable, no card over capacity, every bound
	// pod annotated.
	OK bool `json:"ok"`
}

// RunBurst creates n pods of `units` each on BurstNode all at once (one request each, all
// concurrent) and waits until every one is decided: bound, or PodScheduled=False with
// reason Unschedulable. With a probe it also diffs the extender's filter and bind figures.
// It then waits `settle` for late binds and checks the counts and
// the cards. Errors: API failures or pods undecided after timeout (a failed check is
// reported in the result, not as an error).
func (b *Bench) RunBurst(ctx context.Context, n int, units int64, timeout, settle time.Duration, probe *ExtenderProbe) (BurstResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	perCard := b.Objects.CardUnits / units
	res := BurstResult{Pods: n, Units: units, WantBound: min(n, int(perCard)*b.Objects.Cards)}
	w, err := b.watchSet(ctx, "burst")
	if err != nil {
		return res, err
	}
	if c := w.snapshot(); c.Present > 0 {
		return res, fmt.Errorf("set burst already has %d pods; delete them first", c.Present)
	}
	var before metrics.Scrape
	if probe != nil {
		if before, _, err = probe.read(ctx); err != nil {
			return res, err
		}
	}
	klog.InfoS("burst: creating pods at once", "count", n, "units", units, "node", BurstNode)
	start := time.Now()
	err = parallel.ForEach(ctx, n, n, func(ctx context.Context, i int) error {
		return b.createPod(ctx, b.Objects.BurstPod(i, units))
	})
	if err != nil {
		return res, err
	}
	c, err := w.waitFor(ctx, "every burst pod decided", timeout, func(c counts) bool { return c.Bound+c.Unschedulable >= n })
	if err != nil {
		return res, err
	}
	res.DecidedSeconds = c.LastDecided.Sub(start).Seconds()
	klog.InfoS("burst decided", "seconds", res.DecidedSeconds, "bound", c.Bound, "unschedulable", c.Unschedulable)

	select {
	case <-ctx.Done():
		return res, ctx.Err()
	case <-time.After(settle):
	}
	c = w.snapshot()
	res.Bound, res.Unschedulable = c.Bound, c.Unschedulable
	list, err := w.pods()
	if err != nil {
		return res, err
	}
	if res.Cards, err = checkCards(b.Objects.Resources, list, b.Objects.CardUnits); err != nil {
		return res, err
	}
	res.LoadAfter = loadAvg()
	if probe != nil {
		after, _, err := probe.read(ctx)
		if err != nil {
			return res, err
		}
		f, bd := metrics.Between(before, after, metrics.FilterSeconds), metrics.Between(before, after, metrics.BindSeconds)
		res.Filter, res.Bind = &f, &bd
		res.BindsFailed = after.Values[metrics.BindFailures] - before.Values[metrics.BindFailures]
	}
	res.OK = res.Bound == res.WantBound && res.Unschedulable == n-res.WantBound &&
		len(res.Cards.Over) == 0 && len(res.Cards.Unannotated) == 0
	return res, nil
}

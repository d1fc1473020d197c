package nodecards

import (
	"context"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/gpushare/gpushare/internal/broadcast"
	"github.com/gpushare/gpushare/pkg/gpushare"
	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

// Health tracks which cards are healthy, for both back ends. A critical fault makes a card
// unhealthy; it becomes healthy again once no fault was seen for the quiet period.
type Health struct {
	clock   clock.Clock
	quiet   time.Duration
	uuids   []string
	changed *broadcast.Signal

	mu        sync.Mutex
	lastFault map[string]time.Time // UUID → time of the latest fault; absent: healthy
}

// NewHealth tracks cards, all healthy at first; clk times the quiet period.
func NewHealth(clk clock.Clock, quiet time.Duration, cards []gpushare.Device) *Health {
	h := &Health{clock: clk, quiet: quiet, changed: broadcast.New(), lastFault: map[string]time.Time{}}
	for _, c := range cards {
		h.uuids = append(h.uuids, c.UUID)
	}
	return h
}

// Healthy reports whether the card with uuid takes new work.
func (h *Health) Healthy(uuid string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, bad := h.lastFault[uuid]
	return !bad
}

// fault marks the card (all cards when f.UUID is empty) unhealthy from now on and reports
// whether any card changed state.
func (h *Health) fault(f gpunvml.Fault) bool {
	now := h.clock.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	changed := false
	for _, u := range h.uuids {
		if f.UUID != "" && f.UUID != u {
			continue
		}
		if _, bad := h.lastFault[u]; !bad {
			changed = true
			klog.InfoS("Card unhealthy", "uuid", u, "xid", f.XID)
		}
		h.lastFault[u] = now
	}
	return changed
}

// recover returns cards whose last fault is at least quiet ago to health. It reports
// whether any changed and how long until the next one may recover (0: none pending).
func (h *Health) recover() (changed bool, next time.Duration) {
	now := h.clock.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	for u, t := range h.lastFault {
		left := h.quiet - now.Sub(t)
		if left <= 0 {
			delete(h.lastFault, u)
			changed = true
			klog.InfoS("Card healthy again", "uuid", u, "quiet", h.quiet)
			continue
		}
		if next == 0 || left < next {
			next = left
		}
	}
	return changed, next
}

// Changed returns a channel closed at the next change of any card's health.
func (h *Health) Changed() <-chan struct{} { return h.changed.Wait() }

// Run applies faults (all cards for a fault without a UUID) and recoveries until ctx is
// done, closing the channel of Changed on every change.
func (h *Health) Run(ctx context.Context, faults <-chan gpunvml.Fault) {
	for {
		changed, next := h.recover()
		if changed {
			h.changed.Notify()
		}
		var timer clock.Timer
		var fire <-chan time.Time
		if next > 0 {
			timer = h.clock.NewTimer(next)
			fire = timer.C()
		}
		select {
		case <-ctx.Done():
			return
		case f := <-faults:
			if h.fault(f) {
				h.changed.Notify()
			}
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

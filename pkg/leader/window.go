package leader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
)

// ErrNotHeld is what BeginWrite returns when this replica cannot be sure it holds the lease
// for the length of a write: it does not lead, has released the lease, or its last renewal
// is too old.
var ErrNotHeld = errors.New("this replica cannot be sure it holds the leader lease")

// window tracks until when this replica surely holds the lease, and the leader's writes in
// flight, so that none of them can land once a follower may lead.
//
// A follower takes the lease LeaseDurationSeconds (whole seconds) after it first observed
// the holder's latest renewal, so never before that renewal's write was sent plus that
// duration: the leader's own clock read before sending it bounds the hold from below. A
// write must end margin (LeaseDuration − RenewDeadline) earlier, which covers the API server
// applying a write after its client gave up on it, and clock-rate drift.
type window struct {
	clock  clock.PassiveClock
	lease  time.Duration // as followers read it from the Lease: whole seconds
	margin time.Duration

	mu        sync.Mutex
	heldUntil time.Time     // zero: never renewed
	closed    bool          // the lease is being released: no new write may start
	inflight  int           // writes begun and not done
	idle      chan struct{} // closed while inflight is 0
}

func newWindow(c clock.PassiveClock, cfg Config) *window {
	idle := make(chan struct{})
	close(idle)
	return &window{
		clock:  c,
		lease:  cfg.LeaseDuration.Truncate(time.Second),
		margin: cfg.LeaseDuration - cfg.RenewDeadline,
		idle:   idle,
	}
}

// renewed records a successful write of this replica's holder record, sent at sent.
func (w *window) renewed(sent time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if until := sent.Add(w.lease); until.After(w.heldUntil) {
		w.heldUntil = until
	}
}

// begin starts a write: it returns how long the write may last and done, to call once it is
// over. Errors (wrapping ErrNotHeld): the lease is being released or too close to its end.
func (w *window) begin() (time.Duration, func(), error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, nil, fmt.Errorf("%w: the lease is being released", ErrNotHeld)
	}
	now := w.clock.Now()
	end := w.heldUntil.Add(-w.margin)
	left := end.Sub(now)
	if w.heldUntil.IsZero() || left <= 0 {
		return 0, nil, fmt.Errorf("%w: the last renewal holds it until %s, and writes must end %s before that",
			ErrNotHeld, w.heldUntil.Format(time.RFC3339Nano), w.margin)
	}
	if w.inflight == 0 {
		w.idle = make(chan struct{})
	}
	w.inflight++
	var once sync.Once
	return left, func() { once.Do(w.end) }, nil
}

func (w *window) end() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inflight--
	if w.inflight == 0 {
		close(w.idle)
	}
}

// close refuses new writes and waits until those in flight are done or ctx ends. Each
// write's deadline ends it before the lease does, so the wait is bounded.
func (w *window) close(ctx context.Context) error {
	w.mu.Lock()
	w.closed = true
	idle := w.idle
	w.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the leader's writes in flight before releasing the lease: %w", ctx.Err())
	}
}

// windowLock is the Lease lock with the window kept up to date: each successful write of
// this replica's holder record renews the window, and a write of another holder (the
// release, an empty one) first closes it and waits for the writes in flight, so that a
// released lease, which a follower takes at once, never has a write of ours still coming.
type windowLock struct {
	resourcelock.Interface
	w *window
}

func (l *windowLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	return l.write(ctx, rec, l.Interface.Create)
}

func (l *windowLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	return l.write(ctx, rec, l.Interface.Update)
}

func (l *windowLock) write(ctx context.Context, rec resourcelock.LeaderElectionRecord,
	op func(context.Context, resourcelock.LeaderElectionRecord) error) error {
	if rec.HolderIdentity != l.Identity() {
		if err := l.w.close(ctx); err != nil {
			return err
		}
		return op(ctx, rec)
	}
	sent := l.w.clock.Now()
	if err := op(ctx, rec); err != nil {
		return err
	}
	l.w.renewed(sent)
	return nil
}

package leader

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
	clocktesting "k8s.io/utils/clock/testing"
)

// Timing of the window tests: a follower takes the lease 15 s after the last renewal it
// saw; writes must end 5 s before that.
var windowCfg = Config{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// A write begun after a renewal may last until RenewDeadline after the renewal was sent;
// none may begin later, nor before the first renewal.
func TestWindowBoundsWrites(t *testing.T) {
	tests := []struct {
		name     string
		renewals []time.Duration // sent at t0 + each
		now      time.Duration   // since t0
		wantLeft time.Duration   // 0: refused
	}{
		{"never renewed", nil, 0, 0},
		{"just renewed", []time.Duration{0}, 0, 10 * time.Second},
		{"renewed 4s ago", []time.Duration{0}, 4 * time.Second, 6 * time.Second},
		{"lease ends in 5s: exactly the margin", []time.Duration{0}, 10 * time.Second, 0},
		{"lease ends in 2s", []time.Duration{0}, 13 * time.Second, 0},
		{"lease ended", []time.Duration{0}, 20 * time.Second, 0},
		{"the latest renewal counts", []time.Duration{0, 8 * time.Second}, 12 * time.Second, 6 * time.Second},
		{"an older renewal reported late does not shorten it", []time.Duration{8 * time.Second, 0}, 12 * time.Second, 6 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(t0)
			w := newWindow(clk, windowCfg)
			for _, r := range tc.renewals {
				w.renewed(t0.Add(r))
			}
			clk.SetTime(t0.Add(tc.now))
			left, done, err := w.begin()
			if tc.wantLeft == 0 {
				if !errors.Is(err, ErrNotHeld) {
					t.Fatalf("begin: left %s, err %v; want ErrNotHeld", left, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("begin: %v", err)
			}
			done()
			if left != tc.wantLeft {
				t.Errorf("begin: %s left, want %s", left, tc.wantLeft)
			}
		})
	}
}

// Followers read the lease duration in whole seconds: the window does too.
func TestWindowWholeSecondLease(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0)
	w := newWindow(clk, Config{LeaseDuration: 6500 * time.Millisecond, RenewDeadline: 4 * time.Second})
	w.renewed(t0)
	// Held until t0+6s (not 6.5s), writes end 2.5s before: t0+3.5s.
	if left, _, err := w.begin(); err != nil || left != 3500*time.Millisecond {
		t.Fatalf("begin: %s, %v; want 3.5s", left, err)
	}
}

// lockStub is the Lease lock under windowLock: it records the writes it got and steps the
// clock by took during each, failing with err.
type lockStub struct {
	resourcelock.Interface
	clk    *clocktesting.FakePassiveClock
	took   time.Duration
	err    error
	writes []string
}

func (s *lockStub) Identity() string { return "a_1" }

func (s *lockStub) Update(_ context.Context, rec resourcelock.LeaderElectionRecord) error {
	s.writes = append(s.writes, rec.HolderIdentity)
	s.clk.SetTime(s.clk.Now().Add(s.took))
	return s.err
}

func (s *lockStub) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	return s.Update(ctx, rec)
}

// A renewal counts from when it was sent, however long the API server took; a failed one
// does not count.
func TestWindowLockRenewals(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0)
	stub := &lockStub{clk: clk, took: 3 * time.Second}
	w := newWindow(clk, windowCfg)
	l := &windowLock{Interface: stub, w: w}
	if err := l.Create(t.Context(), resourcelock.LeaderElectionRecord{HolderIdentity: "a_1"}); err != nil {
		t.Fatal(err)
	}
	// Sent at t0, answered at t0+3s: writes end by t0+10s.
	if left, done, err := w.begin(); err != nil || left != 7*time.Second {
		t.Fatalf("after a renewal sent at t0, at t0+3s: %s, %v; want 7s left", left, err)
	} else {
		done()
	}
	stub.err = errors.New("connection refused")
	if err := l.Update(t.Context(), resourcelock.LeaderElectionRecord{HolderIdentity: "a_1"}); err == nil {
		t.Fatal("Update: nil error, want the stub's")
	}
	if left, done, err := w.begin(); err != nil || left != 4*time.Second {
		t.Fatalf("after a failed renewal, at t0+6s: %s, %v; want 4s left (the earlier renewal)", left, err)
	} else {
		done()
	}
}

// The release (a record of another holder, empty) waits for the writes in flight, and none
// begins after it started.
func TestWindowLockReleaseWaitsForWrites(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0)
	stub := &lockStub{clk: clk}
	w := newWindow(clk, windowCfg)
	l := &windowLock{Interface: stub, w: w}
	if err := l.Update(t.Context(), resourcelock.LeaderElectionRecord{HolderIdentity: "a_1"}); err != nil {
		t.Fatal(err)
	}
	_, done, err := w.begin()
	if err != nil {
		t.Fatal(err)
	}

	ended, cancel := context.WithCancel(t.Context())
	cancel()
	if err := l.Update(ended, resourcelock.LeaderElectionRecord{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("release with a write in flight, its ctx ended: %v, want context.Canceled", err)
	}
	if len(stub.writes) != 1 {
		t.Fatalf("lock writes %q: the release was sent while a write was in flight", stub.writes)
	}
	if _, _, err := w.begin(); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("begin once the release started: %v, want ErrNotHeld", err)
	}

	done()
	done() // idempotent
	if err := l.Update(t.Context(), resourcelock.LeaderElectionRecord{}); err != nil {
		t.Fatalf("release with no write in flight: %v", err)
	}
	if len(stub.writes) != 2 || stub.writes[1] != "" {
		t.Fatalf("lock writes %q, want the renewal then the release", stub.writes)
	}
}

package limithook

import (
	"context"
	"fmt"
	"math"
	"time"
)

const (
	// DefaultDeadline is the hook's own bound on its NVML calls (--deadline): loading and
	// initialising the library, the check for the limit call and each card's limit. It is
	// shorter than the runtime's timeout on the hook (RuntimeTimeoutSeconds) so that the hook,
	// not the runtime's kill, ends a stuck call: the hook then says which card and which call
	// hung, and leaves a failure record (WriteFailure), where a killed hook says nothing.
	DefaultDeadline = 20 * time.Second
	// MaxDeadline is the longest --deadline ParseArgs takes: every container start on the
	// node waits for the hook, so a longer bound is a mistake, not a setting.
	MaxDeadline = 2 * time.Minute
	// RuntimeTimeoutMargin is how much longer than the hook's deadline the runtime waits
	// before it kills the hook: time for the hook to write its failure record and exit.
	RuntimeTimeoutMargin = 10 * time.Second
)

// RuntimeTimeoutSeconds is the timeout, in whole seconds (the unit of a CDI or OCI hook
// entry's timeout), after which the runtime kills a hook started with deadline: deadline
// plus RuntimeTimeoutMargin, rounded up.
func RuntimeTimeoutSeconds(deadline time.Duration) int {
	return int(math.Ceil((deadline + RuntimeTimeoutMargin).Seconds()))
}

// DeadlineError is a call the hook abandoned at its deadline.
type DeadlineError struct {
	// Card is the card's UUID; empty for a call on no card (loading the library).
	Card string
	// Who is what did not answer ("NVML"); Call names the abandoned call.
	Who, Call string
	// Waited is the deadline the call ran out of (the hook's --deadline).
	Waited time.Duration
}

func (e *DeadlineError) Error() string {
	msg := fmt.Sprintf("%s did not answer within %s (%s abandoned)", e.Who, e.Waited, e.Call)
	if e.Card != "" {
		msg = "card " + e.Card + ": " + msg
	}
	return msg
}

// within runs f and returns its error, or, when ctx ends first, a *DeadlineError naming card,
// who and call with waited as the time waited (see callWithin).
func within(ctx context.Context, waited time.Duration, card, who, call string, f func() error) error {
	_, err := callWithin(ctx, waited, card, who, call, func() (struct{}, error) { return struct{}{}, f() })
	return err
}

// callWithin runs f and returns what it returns, or, when ctx ends first, a *DeadlineError
// naming card, who and call with waited as the time waited. f keeps running in its goroutine
// after that: a call into the driver cannot be interrupted, and the hook exits right after
// a failure, which ends it, so the leaked goroutine costs nothing. A ctx ended by a cancel
// rather than its deadline gives ctx's error, wrapped with the call. f does not start when
// ctx has ended already.
func callWithin[T any](ctx context.Context, waited time.Duration, card, who, call string, f func() (T, error)) (T, error) {
	var zero T
	abandoned := func() error {
		if ctx.Err() == context.DeadlineExceeded {
			return &DeadlineError{Card: card, Who: who, Call: call, Waited: waited}
		}
		return fmt.Errorf("%s abandoned: %w", call, ctx.Err())
	}
	if ctx.Err() != nil {
		return zero, abandoned()
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1) // buffered: an abandoned f's send never blocks
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		return zero, abandoned()
	}
}

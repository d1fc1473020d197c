package routes

import (
	"fmt"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"
)

// limit answers 429 with a JSON error and Retry-After when MaxInflight requests are already
// being served, else runs h. It caps requests, not connections (as x/net/netutil's
// LimitListener would): the scheduler keeps idle keep-alive connections open, which would
// take a listener's slots while serving nothing, and a connection over a listener's cap
// waits in the accept queue unanswered until the scheduler's httpTimeout instead of getting
// a prompt refusal it can retry. Health, version and metrics are not limited: a probe must
// not fail because the verbs are busy.
func (s *server) limit(verb string, h httprouter.Handle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		select {
		case s.inflight <- struct{}{}:
		default:
			s.Metrics.Throttled(verb)
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusTooManyRequests,
				fmt.Errorf("gpushare extender is serving %d requests, its limit; retry shortly", cap(s.inflight)))
			return
		}
		defer func() { <-s.inflight }()
		h(w, r, ps)
	}
}

// Timeouts are the HTTP server's, each bounding what one connection can hold.
type Timeouts struct {
	// ReadHeader bounds reading a request's headers (slow-header clients).
	ReadHeader time.Duration
	// Read bounds reading a whole request, body included (slow-body clients). A 4 MiB body
	// takes milliseconds on a cluster network.
	Read time.Duration
	// Write bounds a request from the end of its headers to the end of its answer: the
	// body's read, the handler and the write. It must exceed bind's worst case, the Binding
	// write and its read-back (2 × DefaultBindTimeout); a filter at 5000 nodes takes ms.
	Write time.Duration
	// Idle bounds a keep-alive connection between requests. Longer than the scheduler's
	// 90 s idle-connection timeout (client-go's transport defaults), so the scheduler, not
	// the server, closes an idle connection, and no request is sent on one being closed.
	Idle time.Duration
}

// DefaultTimeouts returns the Timeouts the extender's flags default to.
func DefaultTimeouts() Timeouts {
	return Timeouts{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Write: 90 * time.Second, Idle: 120 * time.Second}
}

// Validate reports a timeout that is not positive, or a Write timeout that bind's worst case
// (2 × DefaultBindTimeout) would outlast.
func (t Timeouts) Validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"read header", t.ReadHeader}, {"read", t.Read}, {"write", t.Write}, {"idle", t.Idle}} {
		if d.v <= 0 {
			return fmt.Errorf("%s timeout %s must be positive", d.name, d.v)
		}
	}
	if min := 2 * DefaultBindTimeout; t.Write <= min {
		return fmt.Errorf("write timeout %s must exceed %s: a bind's Binding write and its read-back take up to %s each",
			t.Write, min, DefaultBindTimeout)
	}
	return nil
}

// NewServer returns the HTTP server for the extender's handler on addr, with t's timeouts.
// The caller starts it (ListenAndServe or, with TLSConfig set, ListenAndServeTLS). Errors:
// t is invalid (see Timeouts.Validate).
func NewServer(addr string, h http.Handler, t Timeouts) (*http.Server, error) {
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("http server: %w", err)
	}
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
	}, nil
}

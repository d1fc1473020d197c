package routes

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/gpushare/gpushare/pkg/binding"
)

// errNotSynced answers every scheduler verb and /inspect until the cache is ready.
var errNotSynced = errors.New("gpushare extender is not ready: its node and pod caches have not synced, " +
	"so card allocations are not rebuilt yet; retry shortly")

// whenSynced runs h only once the cache has seen every node and pod that existed at start
// (cache.Cache.Ready). Before that a card held by running pods may read as free: a filter or
// bind answered then could promise it twice. The answer meanwhile is 503 with a JSON error
// and Retry-After; kube-scheduler treats an extender's non-200 filter or bind as a failed
// scheduling attempt and retries the pod with backoff, and ignores a failed prioritize.
func (s *server) whenSynced(verb string, h httprouter.Handle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		if !s.Cache.Ready() {
			s.Metrics.NotReady(verb)
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, errNotSynced)
			return
		}
		h(w, r, ps)
	}
}

// Leadership tells whether this replica may answer the scheduler verbs (implemented by
// *leader.Elector). Config.Leadership nil means a single replica that always may.
type Leadership interface {
	// Leading reports whether this replica holds the leader lease now.
	Leading() bool
	// Leader is the identity of the leader as last observed, "" when unknown.
	Leader() string
	// BeginWrite bounds a bind's writes by the lease: whenLeading checks leadership when
	// the request arrives, BeginWrite again right before the Binding, which must end while
	// the lease surely holds.
	binding.Lease
}

// whenLeading runs h only on the leader. A follower's ledger lacks the cards the leader holds
// for binds in flight, so a filter or bind answered by it could promise a card twice. The
// answer is 503 with a JSON error naming the leader and Retry-After: the Service selects the
// leader alone by its pod label (gpushare.LabelExtenderLeader; followers are ready too, see
// installHealth), so a follower is reached only around a failover.
func (s *server) whenLeading(verb string, h httprouter.Handle) httprouter.Handle {
	if s.Leadership == nil {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		if !s.Leadership.Leading() {
			s.Metrics.NotLeader(verb)
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, notLeaderError(s.Leadership.Leader()))
			return
		}
		h(w, r, ps)
	}
}

func notLeaderError(leader string) error {
	if leader == "" {
		leader = "not known yet"
	}
	return fmt.Errorf("gpushare extender is not the leader; the leader is %s", leader)
}

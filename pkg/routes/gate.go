package routes

import (
	"errors"
	"net/http"

	"github.com/julienschmidt/httprouter"
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

package routes

import (
	"fmt"
	"net/http"

	"github.com/julienschmidt/httprouter"
)

func (s *server) installHealth(r *httprouter.Router) {
	r.GET(HealthzPath, func(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
		fmt.Fprintln(w, "ok")
	})
	// readyz turns ready once the cache rebuilt every allocation from pod annotations, on
	// followers too: a warm follower is a ready replica for drains and rollouts. The Service
	// reaches the leader through its pod label (gpushare.LabelExtenderLeader), and a follower
	// that gets a verb anyway answers 503.
	r.GET(ReadyzPath, func(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
		if !s.Cache.Ready() {
			http.Error(w, "cache not synced", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	// version is plain text, as the old extender served it.
	r.GET("/version", func(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
		fmt.Fprintln(w, s.Version)
	})
	r.Handler(http.MethodGet, "/metrics", s.Metrics.Handler())
}

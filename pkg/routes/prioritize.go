package routes

import (
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

func (s *server) installPrioritize(r *httprouter.Router) {
	r.POST(Prefix+"/prioritize", s.prioritize)
}

// prioritize scores each candidate node 0..10 with the policy's Score of the placement its
// Place would choose there; nodes where the pod does not fit (or a pod without or with an
// invalid gpu-mem request) score 0.
func (s *server) prioritize(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	start := time.Now()
	defer func() { s.Metrics.PrioritizeDuration.Observe(since(start)) }()

	args, ok := s.decodeArgs(w, r)
	if !ok {
		return
	}
	names, err := nodeNames(&args)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	out := make(extenderv1.HostPriorityList, len(names))
	req, reqErr := s.Resources.PodRequest(args.Pod)
	for i, n := range names {
		out[i].Host = n
		if reqErr != nil || req.IsZero() {
			continue
		}
		if score, err := s.Cache.Score(n, req, s.Policy); err == nil {
			out[i].Score = score
		}
	}
	writeJSON(w, http.StatusOK, &out)
}

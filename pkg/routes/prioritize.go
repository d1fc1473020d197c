package routes

import (
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/policy"
)

func (s *server) installPrioritize(r *httprouter.Router) {
	r.POST(Prefix+"/prioritize", s.prioritize)
}

// prioritize scores the candidate nodes 0..10 with policy.Scores over the placements the
// policy's Place would choose: the policy's best node gets 10, the others less by their
// rate. Nodes where the pod does not fit, and every node for a pod with an invalid gpu-mem
// request, score 0. Pods without gpu-mem (sent only when the scheduler configuration gives
// the extender all pods) score 0 everywhere, except under a workload-aware policy (fgd),
// which rates them too, to keep them off the CPU that gpu pods will need.
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
	for i, n := range names {
		out[i].Host = n
	}
	req, reqErr := s.Resources.PodRequest(args.Pod)
	_, workloadAware := s.Policy.(policy.WorkloadAware)
	if reqErr == nil && (!req.IsZero() || workloadAware) {
		pol := s.Cache.ForPod(s.Policy)
		nodes, placements, fits := s.Cache.Views(names, req, pol, cache.HostRequest(args.Pod))
		fit := make([]int, 0, len(names))
		for i := range fits {
			if fits[i] {
				fit = append(fit, i)
			}
		}
		fitNodes := make([]policy.Node, len(fit))
		fitPlacements := make([]policy.Placement, len(fit))
		for j, i := range fit {
			fitNodes[j], fitPlacements[j] = nodes[i], placements[i]
		}
		for j, score := range policy.Scores(pol, fitNodes, fitPlacements) {
			out[fit[j]].Score = score
		}
	}
	writeJSON(w, http.StatusOK, &out)
}

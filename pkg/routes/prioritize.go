package routes

import (
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/policy"
)

func (s *server) installPrioritize(r *httprouter.Router) {
	r.POST(Prefix+"/prioritize", s.limit("prioritize", s.whenLeading("prioritize", s.whenSynced("prioritize", s.prioritize))))
}

// prioritize scores the candidate nodes 0..10 with policy.NormalizeScores over the rates of
// the placements the policy's Place would choose (policy.Scorer rates them without building
// them): the policy's best node gets 10, the others less by their rate. Nodes where the pod
// does not fit, and every node for a pod with an invalid gpu-mem request, score 0. Pods
// without gpu-mem (sent only when the scheduler configuration gives the extender all pods)
// score 0 everywhere, except under a workload-aware policy (fgd), which rates them too, to
// keep them off the CPU that gpu pods will need.
//
// When some node scores above 0, the answer lists only those nodes, in the order asked.
// kube-scheduler adds an extender's weighted score to the nodes the answer names and nothing
// to the others (prioritizeNodes in pkg/scheduler/schedule_one.go, v1.35), so a node left
// out totals what a listed 0 would, while the scheduler decodes, maps and sums one entry per
// listed node: with binpack or fgd most candidates of a large cluster are empty nodes that
// rank last, and the answer for 5000 names shrinks to the partly used ones. The same code
// gives a random tie-breaker only to the nodes an extender names, so (1) on an exact tie of
// total scores a listed node now beats one left out, which only matters when the scheduler's
// own score plugins make such a tie, and (2) when every node scores 0 the answer lists them
// all: left out, they would tie with no tie-breaker and the scheduler would pick the same
// nodes pod after pod (in the trace replay, every CPU-only pod on the first nodes).
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
	var scores []int64 // nil: 0 everywhere
	req, reqErr := s.Resources.PlacementRequest(args.Pod)
	_, workloadAware := s.Policy.(policy.WorkloadAware)
	if reqErr == nil && (!req.IsZero() || workloadAware) {
		pol := s.Cache.ForPod(policy.ForChoice(s.Policy, req.Choice))
		// One Scorer per call: requests are served concurrently, and it is not.
		scorer := s.scorers.Get(pol, req, cache.HostRequest(args.Pod))
		defer s.scorers.Put(scorer)
		rates, fits := make([]float64, len(names)), make([]bool, len(names))
		s.Cache.ViewEachFor(names, req, func(i int, node policy.Node) {
			rates[i], fits[i] = scorer.Score(node)
		})
		scores = policy.NormalizeScores(rates, fits)
	}
	writePriorities(w, names, scores)
}

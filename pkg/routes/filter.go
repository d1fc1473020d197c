package routes

import (
	"errors"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"
	corev1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/metrics"
	"github.com/gpushare/gpushare/pkg/policy"
	"github.com/gpushare/gpushare/pkg/reasons"
)

func (s *server) installFilter(r *httprouter.Router) {
	r.POST(Prefix+"/filter", s.limit("filter", s.whenLeading("filter", s.whenSynced("filter", s.filter))))
}

// filter answers ExtenderArgs with the nodes where the pod's containers fit card by card,
// in the form it was asked (NodeNames when nodeCacheCapable, else full Nodes).
func (s *server) filter(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	start := time.Now()
	defer func() { s.Metrics.FilterDuration.Observe(since(start)) }()

	args, ok := s.decodeArgs(w, r)
	if !ok {
		return
	}
	names, err := nodeNames(&args)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	res := extenderv1.ExtenderFilterResult{
		FailedNodes:                extenderv1.FailedNodesMap{},
		FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{},
	}
	pass := make([]bool, len(names))
	req, reqErr := s.Resources.PlacementRequest(args.Pod)
	switch {
	case reqErr != nil: // the pod fits nowhere until its spec is fixed
		for _, n := range names {
			res.FailedAndUnresolvableNodes[n] = reqErr.Error()
		}
		s.Metrics.Reject(metrics.RejectInvalid, len(names))
	case req.IsZero(): // not ours to judge
		for i := range pass {
			pass[i] = true
		}
	default:
		if node, held := s.Cache.HeldOn(args.Pod.UID); held {
			// An earlier bind of this pod holds cards on node and its Binding may still
			// land: only that node can take the pod (a retried bind there reuses the
			// cards); any other would be refused at bind.
			s.filterHeld(names, node, pass, &res)
			break
		}
		counts := map[string]int{}
		s.Cache.FitsEach(names, req, policy.ForChoice(s.Policy, req.Choice), func(i int, err error) {
			if err == nil {
				pass[i] = true
				return
			}
			rej := s.reject(err)
			counts[rej.Label]++
			if rej.Resolvable {
				res.FailedNodes[names[i]] = rej.Reason
			} else {
				res.FailedAndUnresolvableNodes[names[i]] = rej.Reason
			}
		})
		for label, n := range counts {
			s.Metrics.Reject(label, n)
		}
	}

	if args.NodeNames != nil {
		out := make([]string, 0, len(names))
		for i, n := range names {
			if pass[i] {
				out = append(out, n)
			}
		}
		res.NodeNames = &out
	} else {
		out := &corev1.NodeList{TypeMeta: args.Nodes.TypeMeta, ListMeta: args.Nodes.ListMeta}
		for i := range args.Nodes.Items {
			if pass[i] {
				out.Items = append(out.Items, args.Nodes.Items[i])
			}
		}
		res.Nodes = out
	}
	writeFilterResult(w, &res)
}

// filterHeld passes only the node holding the pod's cards.
func (s *server) filterHeld(names []string, node string, pass []bool, res *extenderv1.ExtenderFilterResult) {
	reason := reasons.HeldElsewhere(node)
	for i, n := range names {
		if n == node {
			pass[i] = true
			continue
		}
		res.FailedNodes[n] = reason
	}
	s.Metrics.Reject(metrics.RejectHeldElsewhere, len(names)-countTrue(pass))
}

func countTrue(b []bool) int {
	n := 0
	for _, v := range b {
		if v {
			n++
		}
	}
	return n
}

// nodeNames returns the candidate node names of a filter or prioritize call (NodeNames
// preferred), or an error for a request without pod or nodes.
func nodeNames(args *extenderv1.ExtenderArgs) ([]string, error) {
	switch {
	case args.Pod == nil:
		return nil, errors.New("request has no pod")
	case args.NodeNames != nil:
		return *args.NodeNames, nil
	case args.Nodes != nil:
		names := make([]string, len(args.Nodes.Items))
		for i := range args.Nodes.Items {
			names[i] = args.Nodes.Items[i].Name
		}
		return names, nil
	}
	return nil, errors.New("request has neither nodenames nor nodes")
}

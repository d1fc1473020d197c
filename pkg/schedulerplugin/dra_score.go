package schedulerplugin

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// draScoring is what scoring a pod with gpushare claims reads: its request and the DRA
// back end's nodes, both read once in PreScore and only read afterwards.
type draScoring struct {
	req  draRequest
	view *draView
}

// readDRAScoring reads the pod's gpushare claims and, when they ask for memory, the DRA
// back end's nodes among nodes (those PreScore rates) from the scheduler's DRA manager; nil
// when the pod's claims ask nothing new (none, or all allocated) or the scheduler runs
// without DRA. Errors: the manager's listers failing.
func (p *Plugin) readDRAScoring(pod *v1.Pod, nodes []fwk.NodeInfo) (*draScoring, error) {
	if p.dra == nil || len(pod.Spec.ResourceClaims) == 0 {
		return nil, nil
	}
	req, err := readDRARequest(pod, p.dra.ResourceClaims())
	if err != nil || len(req) == 0 {
		return nil, err
	}
	view, err := p.readDRAView(nodes)
	if err != nil {
		return nil, err
	}
	return &draScoring{req: req, view: view}, nil
}

// readDRAView reads the DRA back end's nodes among nodes: the gpushare ResourceSlices from
// the scheduler's DRA manager (with its DeviceTaintRules applied), the claims charged to
// them from the plugin's index of claims by pool (readIndexedView), which costs the claims
// of those nodes, not the cluster's, and nothing for a node whose slices and claims are
// unchanged since an earlier cycle; in a cluster without a gpushare ResourceSlice
// (draIndex.hasSlices) nothing is listed. Until the index has synced, every claim is listed
// through the manager (newDRAView). Errors: the manager's listers or tracker failing.
func (p *Plugin) readDRAView(nodes []fwk.NodeInfo) (*draView, error) {
	if p.draIndex != nil && p.draIndex.ready() && !p.draIndex.hasSlices() {
		return &draView{nodes: map[string]*draNode{}}, nil // no gpushare slice: nothing to list
	}
	sl, err := p.dra.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		return nil, fmt.Errorf("listing ResourceSlices: %w", err)
	}
	want := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		if obj := n.Node(); obj != nil {
			want[obj.Name] = true
		}
	}
	if p.draIndex == nil || !p.draIndex.ready() {
		claims, err := p.dra.ResourceClaims().List()
		if err != nil {
			return nil, fmt.Errorf("listing ResourceClaims: %w", err)
		}
		return newDRAView(sl, claims, want, &p.slices), nil
	}
	return readIndexedView(p.draIndex, &p.draNodes, &p.slices, sl, want, p.dra.ResourceClaims())
}

// readDRACards is, for a pod that asks no GPU memory at all scored by a workload-aware
// policy, the DRA back end's nodes among nodes: fgd weighs what the pod's CPU and memory
// leave the cards of each node, and the ledger does not see a DRA node's cards. nil when the
// scheduler runs without DRA or no node of nodes has a gpushare ResourceSlice.
func (p *Plugin) readDRACards(nodes []fwk.NodeInfo) (*draView, error) {
	if p.dra == nil || !p.workloadAware {
		return nil, nil
	}
	view, err := p.readDRAView(nodes)
	if err != nil || len(view.nodes) == 0 {
		return nil, err
	}
	return view, nil
}

// withCards is score with the DRA cards of view given to each node whose ledger entry has
// none.
func (v *draView) withCards(score func(policy.Node) (float64, bool)) func(policy.Node) (float64, bool) {
	return func(node policy.Node) (float64, bool) {
		if n := v.nodes[node.Name]; n != nil && len(node.Cards) == 0 {
			node.Cards = n.cards
		}
		return score(node)
	}
}

// shape is the pod's claims in units on the first of nodes the DRA back end serves, for the
// workload fgd learns (cache.ObserveClaimShape): units are per node, and a cluster has
// mostly one unit size. Zero when no node converts them.
func (d *draScoring) shape(nodes []fwk.NodeInfo) gpushare.PodRequest {
	for _, ni := range nodes {
		obj := ni.Node()
		if obj == nil {
			continue
		}
		if n := d.view.nodes[obj.Name]; n != nil && len(n.cards) > 0 {
			if req, err := d.req.podRequest(n); err == nil {
				return req
			}
		}
	}
	return gpushare.PodRequest{}
}

// draRater rates the pod's claims on node after node. Not safe for concurrent use; make
// one per goroutine.
type draRater struct {
	d    *draScoring
	pol  policy.Policy
	host policy.Host
	pool *policy.ScorerPool          // where the Scorers come from; nil: new ones
	reqs map[draUnitKey]draConverted // the request per node shape, converted once
}

// draUnitKey is what converting a draRequest depends on.
type draUnitKey struct {
	unit, defUnits int64
	cards          int
}

type draConverted struct {
	req gpushare.PodRequest
	err error
	// sc scores req on the nodes of this shape (policy.NewFirstFitScorer: FirstFit's cards,
	// the policy's score, buffers and fgd's memo kept from node to node); nil when err.
	sc *policy.Scorer
}

// rater scores d on node after node for one goroutine, its Scorers from pool (nil: new
// ones); release hands them back.
func (d *draScoring) rater(pol policy.Policy, host policy.Host, pool *policy.ScorerPool) *draRater {
	return &draRater{d: d, pol: pol, host: host, pool: pool, reqs: map[draUnitKey]draConverted{}}
}

// release hands the rater's Scorers back to its pool; the rater is not used after.
func (r *draRater) release() {
	if r.pool == nil {
		return
	}
	for _, conv := range r.reqs {
		r.pool.Put(conv.sc)
	}
}

// score places the claims on node's DRA cards where kube-scheduler's allocator will put
// them (policy.FirstFit: the first cards with room, in index order) and rates that
// placement with the policy's Score, bit for bit (through one policy.NewFirstFitScorer per
// node shape, whose buffers and memo serve node after node); ok is false where they do not
// fit or the node has no gpushare ResourceSlice. node's own cards (the ledger's) are
// replaced; its host resources are kept.
func (r *draRater) score(node policy.Node) (float64, bool) {
	n := r.d.view.nodes[node.Name]
	if n == nil || len(n.cards) == 0 {
		return 0, false
	}
	k := draUnitKey{unit: n.unit, defUnits: n.defUnits, cards: len(n.cards)}
	conv, ok := r.reqs[k]
	if !ok {
		conv.req, conv.err = r.d.req.podRequest(n)
		if conv.err == nil {
			if r.pool != nil {
				conv.sc = r.pool.GetFirstFit(r.pol, conv.req, r.host)
			} else {
				conv.sc = policy.NewFirstFitScorer(r.pol, conv.req, r.host)
			}
		}
		r.reqs[k] = conv
	}
	if conv.err != nil {
		return 0, false
	}
	node.Cards = n.cards
	return conv.sc.Score(node)
}

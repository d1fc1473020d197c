package schedulerplugin

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpushare/gpushare/pkg/policy"
	"github.com/gpushare/gpushare/pkg/reasons"
)

// errNotReady: the ledger has not yet seen every node and pod; answering now could promise a
// card twice. The scheduler retries the pod with backoff.
var errNotReady = errors.New(Name + ": the gpushare ledger is still syncing its nodes and pods")

// PreFilter reads the pod's gpu-mem request into the cycle state. A pod without gpu-mem is
// skipped (Filter and the dry-run extensions do not run for it), except that one whose
// gpushare claims ask memory is restricted to the nodes whose DRA cards hold them
// (narrowDRA); an invalid request is unschedulable everywhere until the spec is fixed; a
// pod whose earlier bind may still land is restricted to that bind's node; any other gpu-mem
// pod, under fgd and binpack, to the nodes the policy rates best for it (narrowMem).
func (p *Plugin) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if !p.cache.Ready() {
		return nil, fwk.AsStatus(errNotReady)
	}
	req, err := p.res.PlacementRequest(pod)
	if err != nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	s := &cycleState{req: req, pol: p.cache.ForPod(policy.ForChoice(p.pol, req.Choice))}
	state.Write(stateKey, s)
	if req.IsZero() {
		res, err := p.narrowDRA(ctx, s, pod, nodes)
		if err != nil {
			return nil, fwk.AsStatus(fmt.Errorf("%s: reading the pod's claims: %w", Name, err))
		}
		if res == nil {
			return nil, fwk.NewStatus(fwk.Skip)
		}
		return res, nil // Filter passes every node of res: the allocator decides there
	}
	if node, held := p.cache.HeldOn(pod.UID); held {
		s.held = node
		return &fwk.PreFilterResult{NodeNames: sets.New(node)}, nil
	}
	return p.narrowMem(ctx, s, pod, nodes), nil
}

// PreFilterExtensions implements fwk.PreFilterPlugin: AddPod and RemovePod.
func (p *Plugin) PreFilterExtensions() fwk.PreFilterExtensions { return p }

// Filter passes the node when the pod's containers fit its cards (with the dry run's
// changes, if any), else rejects it with the extender's reason: Unschedulable when
// evicting pods could make room, UnschedulableAndUnresolvable for a node that is not a
// gpushare node.
func (p *Plugin) Filter(_ context.Context, state fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	s, err := readState(state)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if s.req.IsZero() {
		return nil // a claim pod PreFilter narrowed: DynamicResources filters it
	}
	obj := nodeInfo.Node()
	// The name is read only when needed: the node object's memory is seldom in cache here,
	// and this runs for every node of every cycle.
	if s.held != "" && obj.Name != s.held {
		return fwk.NewStatus(fwk.Unschedulable, reasons.HeldElsewhere(s.held))
	}
	var d *nodeDryRun
	if s.dryRun != nil {
		d = s.dryRun[obj.Name]
	}
	if d != nil {
		_, err = p.cache.PlaceWith(obj.Name, s.req, s.pol, d.delta())
	} else {
		err = p.cache.FitsNode(obj, s.req, s.pol)
	}
	if err == nil {
		return nil
	}
	rej := p.wording.Reject(err)
	if rej.Resolvable {
		return fwk.NewStatus(fwk.Unschedulable, rej.Reason)
	}
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, rej.Reason)
}

// RemovePod takes a pod off the node for the rest of this (dry-run) cycle: its cards'
// units, as the ledger counts them, become free. Preemption removes each candidate victim
// this way.
func (p *Plugin) RemovePod(_ context.Context, state fwk.CycleState, _ *v1.Pod, podInfo fwk.PodInfo, nodeInfo fwk.NodeInfo) *fwk.Status {
	s, err := readState(state)
	if err != nil {
		return fwk.AsStatus(err)
	}
	victim, node := podInfo.GetPod(), nodeInfo.Node().Name
	d := s.nodeDryRun(node)
	if _, ok := d.added[victim.UID]; ok { // a pod this dry run added: take it back
		delete(d.added, victim.UID)
		return nil
	}
	if at, usage, ok := p.cache.Counted(victim.UID); ok && at == node {
		d.removed[victim.UID] = usage
	}
	return nil
}

// AddPod puts a pod on the node for the rest of this (dry-run) cycle: a victim preemption
// removed gets its cards back; a pod the ledger does not count there (a nominated pod)
// takes the cards the policy would give it, if it fits.
func (p *Plugin) AddPod(ctx context.Context, state fwk.CycleState, _ *v1.Pod, podInfo fwk.PodInfo, nodeInfo fwk.NodeInfo) *fwk.Status {
	s, err := readState(state)
	if err != nil {
		return fwk.AsStatus(err)
	}
	pod, node := podInfo.GetPod(), nodeInfo.Node().Name
	d := s.nodeDryRun(node)
	if _, ok := d.removed[pod.UID]; ok {
		delete(d.removed, pod.UID)
		return nil
	}
	if at, _, ok := p.cache.Counted(pod.UID); ok && at == node {
		return nil // counted already
	}
	req, err := p.res.PlacementRequest(pod)
	if err != nil || req.IsZero() {
		return nil // an invalid request never runs; no gpu-mem takes no card
	}
	pl, err := p.cache.PlaceWith(node, req, s.pol, d.delta())
	if err != nil {
		klog.FromContext(ctx).V(4).Info("nominated pod does not fit the node's cards in the dry run",
			"pod", klog.KObj(pod), "node", node, "err", err)
		return nil
	}
	d.added[pod.UID] = pl.Usage
	return nil
}

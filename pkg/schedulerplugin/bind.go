package schedulerplugin

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpushare/gpushare/pkg/cache"
)

// Reserve holds the cards the policy chooses on the node in the ledger (cache.Reserve), so
// that no other pod is promised them while this one binds. A retried pod whose earlier
// Binding may still land reuses that bind's cards. Pods without gpu-mem hold nothing; the
// gpushare claims DynamicResources allocated for them are watched until the informer
// shows them allocated (watchClaims).
func (p *Plugin) Reserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	s, err := readState(state)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if s.req.IsZero() {
		p.watchClaims(pod)
		p.narrowed.forget(pod.UID)
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, reserveWait)
	defer cancel()
	slim := cache.NewPod(pod, p.res)
	rsv, err := p.cache.Reserve(rctx, nodeName, pod, s.req, s.pol)
	if err != nil {
		if ferr := p.binder.ReserveFailed(pod, nodeName, err); ferr != nil {
			return fwk.NewStatus(fwk.Unschedulable, ferr.Error())
		}
		s.bind = &reserved{pod: slim, placed: true}
		p.narrowed.forget(pod.UID)
		return nil
	}
	s.bind = &reserved{pod: slim, rsv: rsv}
	p.narrowed.forget(pod.UID)
	return nil
}

// Unreserve frees what Reserve held when the pod's cycle fails before or in Bind. Cards
// whose Binding may have landed stay held: those Bind already reported (cache.Finish ignores
// a second report), and those Reserve reused from an earlier bind whose outcome is unknown.
// The pod's watched claims are forgotten (unwatchClaims).
func (p *Plugin) Unreserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) {
	p.unwatchClaims(pod)
	s, err := readState(state)
	if err != nil || s.bind == nil || s.bind.placed {
		return
	}
	outcome := cache.BindRefused
	if s.bind.rsv.Reused {
		outcome = cache.BindUnknown
	}
	p.cache.Finish(s.bind.rsv, outcome)
	klog.FromContext(ctx).V(4).Info("GPUShare reservation released", "pod", klog.KObj(pod), "node", nodeName, "reused", s.bind.rsv.Reused)
}

// Bind binds a pod that requests gpu-mem with the Binding that carries its card annotations
// (binding.Binder.Write: one API write, a failed one settled by reading the pod back). Other
// pods are skipped, for DefaultBinder.
func (p *Plugin) Bind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	s, err := readState(state)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if s.req.IsZero() {
		return fwk.NewStatus(fwk.Skip)
	}
	switch {
	case s.bind == nil:
		return fwk.AsStatus(fmt.Errorf("%s: pod %s/%s reached Bind without a reservation", Name, pod.Namespace, pod.Name))
	case s.bind.placed:
		return nil
	}
	if err := p.binder.Write(ctx, s.bind.pod, nodeName, s.req, s.bind.rsv); err != nil {
		return fwk.AsStatus(err)
	}
	return nil
}

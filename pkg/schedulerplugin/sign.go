package schedulerplugin

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

var _ fwk.SignPlugin = (*Plugin)(nil)

// signKey names GPUShare's part of a pod signature: what it reads of the pod.
const signKey = "v1.Pod.Spec.Containers.Resources.Limits[gpu-mem,gpu-count]"

// signedContainer is one gpu-mem container in a signature.
type signedContainer struct {
	Init  bool  `json:"init"`
	Index int   `json:"index"`
	Units int64 `json:"units"`
	Cards int   `json:"cards"`
	// Limit is the container's memory limit (gpushare.AnnotationMemLimit): a node's isolation
	// mode decides whether it takes a pod with one.
	Limit int64 `json:"limit,omitempty"`
	// Compute is the container's compute share (gpushare.AnnotationComputeShare): it decides
	// the node's mode and which cards take the pod.
	Compute uint8 `json:"compute,omitempty"`
}

// SignPod lets kube-scheduler's opportunistic batching reuse one pod's filter and score
// results for the next pod with the same signature: GPUShare's verdicts depend on the pod
// only through its gpu-mem request, and the ledger changes between two such cycles only on
// the node the first pod took, which the batch re-filters and re-scores (and Reserve
// re-checks under the node lock). It refuses (Unschedulable: no batching for the pod) under
// a workload-aware policy, whose rates follow the whole cluster's workload, for a pod whose
// earlier bind holds cards, for a pod with card annotations (gpushare.CardChoice), whose
// verdicts depend on them too, for a pod with resource claims (GPUShare rates what they
// ask, which the signature does not hold; DynamicResources refuses such pods too), and for
// an invalid request.
func (p *Plugin) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if p.workloadAware {
		return nil, fwk.NewStatus(fwk.Unschedulable, "the "+p.pol.Name()+" policy rates nodes by the whole cluster's workload")
	}
	if len(pod.Spec.ResourceClaims) > 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable, "the pod's claims are rated on the DRA back end's cards")
	}
	req, err := p.res.PlacementRequest(pod)
	if err != nil {
		return nil, fwk.NewStatus(fwk.Unschedulable, err.Error())
	}
	if req.Choice != nil {
		return nil, fwk.NewStatus(fwk.Unschedulable, "the pod chooses its cards or card policy by annotation")
	}
	if _, held := p.cache.HeldOn(pod.UID); held {
		return nil, fwk.NewStatus(fwk.Unschedulable, "an earlier bind of the pod holds cards")
	}
	sig := make([]signedContainer, len(req.Containers))
	for i, c := range req.Containers {
		sig[i] = signedContainer{Init: c.Ref.InitList, Index: c.Ref.Index, Units: c.Units, Cards: c.Cards, Limit: c.Limit, Compute: c.Compute}
	}
	return []fwk.SignFragment{{Key: signKey, Value: sig}}, nil
}

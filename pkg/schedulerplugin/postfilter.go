package schedulerplugin

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// PostFilter, for a pod whose nodes PreFilter narrowed this cycle (narrowMem, narrowDRA) and
// that none of them took, asks the scheduling queue to retry it at once
// (fwk.PodActivator.Activate, which for a pod still in its cycle takes effect when the pod
// comes back): the retry is not narrowed and sees every node. Without it the pod would wait
// in the unschedulable queue for a cluster event that may help it, up to
// podMaxInUnschedulablePodsDuration, although another node may hold it now. It always
// answers Unschedulable: it makes no node schedulable, and preemption (DefaultPreemption,
// before it) keeps its say.
func (p *Plugin) PostFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	s, err := readState(state)
	if err != nil || !s.narrowed || p.activator == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	logger := klog.FromContext(ctx)
	logger.V(4).Info("GPUShare retries a narrowed pod on every node", "pod", klog.KObj(pod))
	p.activator.Activate(logger, map[string]*v1.Pod{pod.Namespace + "/" + pod.Name: pod})
	request := narrowedGPUMem
	if s.req.IsZero() {
		request = narrowedClaims
	}
	p.narrowings.WithLabelValues(request, outcomeRetried).Inc()
	return nil, fwk.NewStatus(fwk.Unschedulable, "the nodes GPUShare rated best refused the pod; retrying on every node")
}

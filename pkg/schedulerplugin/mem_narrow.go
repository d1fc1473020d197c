package schedulerplugin

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcehelper "k8s.io/component-helpers/resource"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpushare/gpushare/pkg/policy"
)

// narrowMem is, for a pod that requests gpu-mem, the nodes its Filter and Score should run
// on when the plugin's policy packs (fgd, binpack): the narrowNodes best-rated of those whose
// cards hold it and that pass a cheap reading of kube-scheduler's commonest filters
// (admission). PreScore would rate every node the pod is filtered on anyway; rating them in
// PreFilter instead, and handing the few best on, spares the other plugins' Filter and Score
// on the rest, which at 5000 nodes is most of a pod's scheduling cost. The policy's best
// node that passes those checks is among them, so where GPUShare's score carries the choice
// (weight 5) the pod lands where it would without narrowing; the other score plugins still
// rank the nodes kept.
//
// nil (every node) when there is nothing to narrow or narrowing could mislead: narrowing
// turned off (GPUShareArgs.MemNarrowing), a policy that does not pack, a pod that picks its
// own (gpushare.CardChoice), no more nodes than narrowNodes, a pod with constraints
// GPUShare does not read (narrowable), no node whose cards hold it and that passes the
// checks (Filter then gives every node's reason), or a pod narrowed before that was not
// placed since: its retry sees every node, so that a node set the other filters refuse
// cannot hold it back, and so that preemption weighs every node.
func (p *Plugin) narrowMem(ctx context.Context, s *cycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.PreFilterResult {
	if !p.memNarrowing || !policy.Packs(p.pol.Name()) || s.req.Choice != nil || len(nodes) <= narrowNodes ||
		!narrowable(pod) || p.narrowed.has(pod.UID) {
		return nil
	}
	r := p.rate(ctx, s, pod, nodes)
	defer r.release(&p.rates)
	adm := newAdmission(klog.FromContext(ctx), pod)
	names := r.bestAdmitted(narrowNodes, narrowChecks, func(i int) bool { return adm.admits(nodes[i]) })
	if len(names) == 0 {
		return nil
	}
	p.narrowed.add(pod.UID)
	s.narrowed = true
	p.narrowings.WithLabelValues(narrowedGPUMem, outcomeNarrowed).Inc()
	return &fwk.PreFilterResult{NodeNames: sets.New(names...)}
}

// bestAdmitted are the names of up to n fitting nodes, best-rated first, that admit(i)
// passes, of the checks best-rated fitting nodes.
func (r *nodeRates) bestAdmitted(n, checks int, admit func(i int) bool) []string {
	idx := r.fitting(true)
	var out []string
	for _, i := range idx[:min(len(idx), checks)] {
		if admit(i) {
			if out = append(out, r.names[i]); len(out) == n {
				break
			}
		}
	}
	return out
}

// narrowable reports whether the pod's other constraints are ones admission reads or ones
// that seldom refuse a node: a pod with required inter-pod (anti-)affinity, a DoNotSchedule
// topology spread, a host port or a volume bound to a zone or node (a PersistentVolumeClaim,
// an ephemeral volume) can be refused by every node the policy rates best, so it keeps every
// node. So does a pod of positive priority that may preempt: were the nodes kept all
// refused, preemption would weigh only them (kube-scheduler marks the others unresolvable)
// and could evict pods where another node had room.
func narrowable(pod *v1.Pod) bool {
	if p := pod.Spec.Priority; p != nil && *p > 0 && (pod.Spec.PreemptionPolicy == nil || *pod.Spec.PreemptionPolicy != v1.PreemptNever) {
		return false
	}
	if a := pod.Spec.Affinity; a != nil {
		if a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			return false
		}
		if a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			return false
		}
	}
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == v1.DoNotSchedule {
			return false
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			return false
		}
	}
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, port := range c.Ports {
				if port.HostPort > 0 {
					return false
				}
			}
		}
	}
	return true
}

// admission reads, for one pod, the checks of kube-scheduler's filters that most often refuse
// a node a packing policy rates best: NodeUnschedulable (cordoned), TaintToleration
// (NoSchedule and NoExecute taints), NodeAffinity (nodeSelector and required node affinity)
// and NodeResourcesFit (CPU, memory, ephemeral storage, extended resources and the pod count
// against allocatable). It errs towards refusing: a node it refuses is only left out of the
// narrowed set.
type admission struct {
	logger   klog.Logger
	pod      *v1.Pod
	affinity nodeaffinity.RequiredNodeAffinity
	requests v1.ResourceList
}

func newAdmission(logger klog.Logger, pod *v1.Pod) *admission {
	return &admission{
		logger:   logger,
		pod:      pod,
		affinity: nodeaffinity.GetRequiredNodeAffinity(pod),
		requests: resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}),
	}
}

// unschedulableTaint is the taint NodeUnschedulable lets a pod past a cordoned node with.
var unschedulableTaint = v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}

func (a *admission) admits(info fwk.NodeInfo) bool {
	node := info.Node()
	if node == nil {
		return false
	}
	if node.Spec.Unschedulable && !v1helper.TolerationsTolerateTaint(a.logger, a.pod.Spec.Tolerations, &unschedulableTaint, false) {
		return false
	}
	if _, untolerated := v1helper.FindMatchingUntoleratedTaint(a.logger, node.Spec.Taints, a.pod.Spec.Tolerations, func(t *v1.Taint) bool {
		return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
	}, false); untolerated {
		return false
	}
	if ok, err := a.affinity.Match(node); err != nil || !ok {
		return false
	}
	alloc, used := info.GetAllocatable(), info.GetRequested()
	if len(info.GetPods())+1 > alloc.GetAllowedPodNumber() {
		return false
	}
	for name, q := range a.requests {
		var want, free int64
		switch name {
		case v1.ResourceCPU:
			want, free = q.MilliValue(), alloc.GetMilliCPU()-used.GetMilliCPU()
		case v1.ResourceMemory:
			want, free = q.Value(), alloc.GetMemory()-used.GetMemory()
		case v1.ResourceEphemeralStorage:
			want, free = q.Value(), alloc.GetEphemeralStorage()-used.GetEphemeralStorage()
		case v1.ResourcePods:
			continue
		default:
			want, free = q.Value(), alloc.GetScalarResources()[name]-used.GetScalarResources()[name]
		}
		if want > free {
			return false
		}
	}
	return true
}

package scale

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpushare/gpushare/internal/bench/objects"
	"github.com/gpushare/gpushare/pkg/gpushare"
)

const (
	// LabelSet marks every node and pod the bench creates; the value names the set
	// ("nodes", a phase name, "burst", "placed"), so informers and clean-up touch nothing else.
	LabelSet = "gpushare.io/scalebench"
	// TaintBurst keeps the phase pods off the burst node; only burst pods tolerate it.
	TaintBurst = "gpushare.io/scalebench-burst"
	// BurstNode is the extra node the burst pods are pinned to (not one of the N nodes).
	BurstNode = "scale-burst"
	// DefaultNamespace holds every pod of the bench.
	DefaultNamespace = "scale-bench"
	// nodePodCapacity: only gpu-mem decides what fits (40,000 placed pods are 8 per node).
	nodePodCapacity = 110
	// cardModel is a 16 GiB card: 16 units of 1 GiB.
	cardModel = "NVIDIA A100-SXM4-16GB"
)

// Objects builds the bench's nodes and pods.
type Objects struct {
	Resources gpushare.Resources
	Namespace string
	Cards     int   // cards per node (8)
	CardUnits int64 // gpu-mem units per card (16)
	// SchedulerName is the pods' spec.schedulerName: empty for the cluster's default
	// scheduler, "gpushare-scheduler" for the plugin phase.
	SchedulerName string
	// DRA makes the scheduling phases' pods ask for their memory through ResourceClaims
	// (Claim, DRAPod) instead of gpu-mem.
	DRA bool
}

// DefaultObjects is 8 cards × 16 units per node, the default resource names, namespace
// DefaultNamespace.
func DefaultObjects() Objects {
	return Objects{Resources: gpushare.DefaultResources(), Namespace: DefaultNamespace, Cards: 8, CardUnits: 16}
}

// NodeName is the name of bench node i (0-based).
func NodeName(i int) string { return fmt.Sprintf("scale-node-%05d", i) }

// Node returns a GPU-sharing node of Cards × CardUnits GiB units, 64 CPUs and 512 GiB,
// labelled LabelSet=nodes, with a Ready condition (nobody heartbeats it). burst adds the
// TaintBurst NoSchedule taint.
func (o Objects) Node(name string, burst bool) (*corev1.Node, error) {
	n := o.nodeSpec(name)
	if burst {
		n.Taints = []corev1.Taint{{Key: TaintBurst, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	}
	return n.Build(o.Resources)
}

// nodeSpec describes bench node name: Cards × CardUnits GiB units, 64 CPUs and 512 GiB,
// labelled LabelSet=nodes, Ready.
func (o Objects) nodeSpec(name string) objects.Node {
	return objects.Node{
		Name: name, Model: cardModel, Cards: o.Cards, CardUnits: o.CardUnits,
		Unit: gpushare.GiB, CardMemoryMiB: o.CardUnits * gpushare.GiB.MiB,
		MilliCPU: 64000, MemoryMiB: 512 << 10, MaxPods: nodePodCapacity,
		Labels: map[string]string{LabelSet: "nodes"},
		Ready:  true,
	}
}

// PodShape is one pod's gpu-mem request: Units in total over Cards cards (Cards 1: the
// gpu-count limit is left out, as most pod specs do).
type PodShape struct {
	Units int64
	Cards int64
}

// podSet returns n deterministic shapes: per-card units cycle 1..8, and every fifth pod
// wants 2 cards (so 20% are multi-card, 2..16 units).
func podSet(n int) []PodShape {
	out := make([]PodShape, n)
	for i := range out {
		per := int64(1 + i%8)
		if i%5 == 4 {
			out[i] = PodShape{Units: 2 * per, Cards: 2}
		} else {
			out[i] = PodShape{Units: per, Cards: 1}
		}
	}
	return out
}

// podName is the name of pod i of a set.
func podName(set string, i int) string { return fmt.Sprintf("%s-%05d", set, i) }

// Pod returns pod i of set with shape s, labelled LabelSet=set.
func (o Objects) Pod(set string, i int, s PodShape) *corev1.Pod {
	return objects.Pod{
		Name: podName(set, i), Namespace: o.Namespace, Labels: map[string]string{LabelSet: set},
		Units: s.Units, Cards: s.Cards, SchedulerName: o.SchedulerName,
	}.Build(o.Resources)
}

// BurstPod is pod i of the "burst" set: units on one card, pinned to BurstNode by a
// hostname nodeSelector and tolerating its taint.
func (o Objects) BurstPod(i int, units int64) *corev1.Pod {
	p := o.Pod("burst", i, PodShape{Units: units, Cards: 1})
	p.Spec.NodeSelector = map[string]string{objects.LabelHostname: BurstNode}
	p.Spec.Tolerations = []corev1.Toleration{{Key: TaintBurst, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	return p
}

// PlacedPod is pod i of the "placed" set, created already bound to node with units on card,
// carrying the allocation annotations the extender writes at bind (bound at now).
func (o Objects) PlacedPod(i int, node string, card int, units int64, now time.Time) *corev1.Pod {
	p := o.Pod("placed", i, PodShape{Units: units, Cards: 1})
	var a gpushare.PodAllocation
	a.Set(gpushare.ContainerRef{Index: 0}, gpushare.CardUnits{card: units})
	p.Annotations = gpushare.BindAnnotations(a, units, gpushare.CardUnits{card: o.CardUnits}, gpushare.Unit{}, now)
	p.Spec.NodeName = node
	return p
}

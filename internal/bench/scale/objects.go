package scale

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	// placeholderImage is never pulled: no kubelet runs these pods.
	placeholderImage = "registry.k8s.io/pause:3.10"
	labelHostname    = "kubernetes.io/hostname"
)

// Objects builds the bench's nodes and pods.
type Objects struct {
	Resources gpushare.Resources
	Namespace string
	Cards     int   // cards per node (8)
	CardUnits int64 // gpu-mem units per card (16)
}

// DefaultObjects is 8 cards × 16 units per node, the default resource names, namespace
// DefaultNamespace.
func DefaultObjects() Objects {
	return Objects{Resources: gpushare.DefaultResources(), Namespace: DefaultNamespace, Cards: 8, CardUnits: 16}
}

// NodeName is the name of bench node i (0-based).
func NodeName(i int) string { return fmt.Sprintf("scale-node-%05d", i) }

// Node returns a GPU-sharing node: labels cgpu=true, kubernetes.io/hostname and LabelSet;
// the per-card inventory annotation; allocatable cpu, memory, pods, gpu-count (Cards) and
// gpu-mem (Cards × CardUnits units); a Ready condition (nobody heartbeats it). burst adds
// the TaintBurst NoSchedule taint.
func (o Objects) Node(name string, burst bool) (*corev1.Node, error) {
	inv := gpushare.Inventory{Unit: gpushare.GiB}
	for i := 0; i < o.Cards; i++ {
		inv.Devices = append(inv.Devices, gpushare.Device{
			Index: i, UUID: "GPU-" + name + "-" + strconv.Itoa(i), Model: "NVIDIA A100-SXM4-16GB",
			Units: o.CardUnits, MemoryMiB: o.CardUnits * gpushare.GiB.MiB, Healthy: true,
		})
	}
	invJSON, err := inv.Marshal()
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods:   *resource.NewQuantity(nodePodCapacity, resource.DecimalSI),
		o.Resources.Count:     *resource.NewQuantity(int64(o.Cards), resource.DecimalSI),
		o.Resources.Mem:       *resource.NewQuantity(int64(o.Cards)*o.CardUnits, resource.DecimalSI),
	}
	now := metav1.Now()
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				gpushare.NodeLabelKey: gpushare.NodeLabelValue,
				labelHostname:         name,
				LabelSet:              "nodes",
			},
			Annotations: map[string]string{gpushare.AnnotationNodeInventory: invJSON},
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity.DeepCopy(),
			Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "ScaleBench",
				Message: "created Ready by gpushare-scalebench", LastHeartbeatTime: now, LastTransitionTime: now,
			}},
		},
	}
	if burst {
		n.Spec.Taints = []corev1.Taint{{Key: TaintBurst, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	}
	return n, nil
}

// PodShape is one pod's gpu-mem request: Units in total over Cards cards (Cards 1: the
// gpu-count limit is left out, as most pod specs do).
type PodShape struct {
	Units int64
	Cards int64
}

// PodSet returns n deterministic shapes: per-card units cycle 1..8, and every fifth pod
// wants 2 cards (so 20% are multi-card, 2..16 units).
func PodSet(n int) []PodShape {
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

// PodName is the name of pod i of a set.
func PodName(set string, i int) string { return fmt.Sprintf("%s-%05d", set, i) }

// Pod returns pod i of set with shape s: one container with gpu-mem (and gpu-count when
// s.Cards > 1) limits, no kubelet concerns (grace 0, no token).
func (o Objects) Pod(set string, i int, s PodShape) *corev1.Pod {
	limits := corev1.ResourceList{o.Resources.Mem: *resource.NewQuantity(s.Units, resource.DecimalSI)}
	if s.Cards > 1 {
		limits[o.Resources.Count] = *resource.NewQuantity(s.Cards, resource.DecimalSI)
	}
	var grace int64
	noToken := false
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      PodName(set, i),
			Namespace: o.Namespace,
			Labels:    map[string]string{LabelSet: set},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "main", Image: placeholderImage,
				Resources: corev1.ResourceRequirements{Limits: limits},
			}},
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &grace,
			AutomountServiceAccountToken:  &noToken,
		},
	}
}

// BurstPod is pod i of the "burst" set: units on one card, pinned to BurstNode by a
// hostname nodeSelector and tolerating its taint.
func (o Objects) BurstPod(i int, units int64) *corev1.Pod {
	p := o.Pod("burst", i, PodShape{Units: units, Cards: 1})
	p.Spec.NodeSelector = map[string]string{labelHostname: BurstNode}
	p.Spec.Tolerations = []corev1.Toleration{{Key: TaintBurst, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	return p
}

// PlacedPod is pod i of the "placed" set, created already bound to node with units on card,
// carrying the allocation annotations the extender writes at bind (bound at now).
func (o Objects) PlacedPod(i int, node string, card int, units int64, now time.Time) *corev1.Pod {
	p := o.Pod("placed", i, PodShape{Units: units, Cards: 1})
	var a gpushare.PodAllocation
	a.Set(gpushare.ContainerRef{Index: 0}, gpushare.CardUnits{card: units})
	p.Annotations = gpushare.BindAnnotations(a, units, gpushare.CardUnits{card: o.CardUnits}, now)
	p.Spec.NodeName = node
	return p
}

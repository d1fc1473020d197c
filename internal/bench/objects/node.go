package objects

import (
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// Node describes a GPU-sharing node of Cards identical cards.
type Node struct {
	Name          string
	Model         string // card model: inventory and LabelGPUProduct (when set)
	Cards         int
	CardUnits     int64         // gpu-mem units per card
	Unit          gpushare.Unit // what one unit is, for the inventory
	CardMemoryMiB int64         // per card, for the inventory
	MilliCPU      int64
	MemoryMiB     int64
	MaxPods       int64
	Labels        map[string]string // beside cgpu=true, hostname and the product
	Annotations   map[string]string // beside the inventory
	// Ready adds a Ready condition, for nodes no kubelet or kwok heartbeats.
	Ready  bool
	Taints []corev1.Taint
}

// Inventory is the node's cards as share-plugin reports them: Cards healthy cards of Model,
// CardUnits units and CardMemoryMiB each, UUIDs GPU-<node>-<index>.
func (n Node) Inventory() gpushare.Inventory {
	inv := gpushare.Inventory{Unit: n.Unit}
	for i := range n.Cards {
		inv.Devices = append(inv.Devices, gpushare.Device{
			Index: i, UUID: fmt.Sprintf("GPU-%s-%d", n.Name, i), Model: n.Model,
			Units: n.CardUnits, MemoryMiB: n.CardMemoryMiB, Healthy: true,
		})
	}
	return inv
}

// Build returns the Node object: labels cgpu=true, kubernetes.io/hostname and the product;
// the per-card inventory annotation; capacity = allocatable cpu, memory, pods, gpu-count
// (Cards) and gpu-mem (Cards × CardUnits) under res's names.
func (n Node) Build(res gpushare.Resources) (*corev1.Node, error) {
	invJSON, err := n.Inventory().Marshal()
	if err != nil {
		return nil, fmt.Errorf("building node %s: %w", n.Name, err)
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(n.MilliCPU, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(n.MemoryMiB<<20, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(n.MaxPods, resource.DecimalSI),
		res.Count:             *resource.NewQuantity(int64(n.Cards), resource.DecimalSI),
		res.Mem:               *resource.NewQuantity(int64(n.Cards)*n.CardUnits, resource.DecimalSI),
	}
	labels := map[string]string{gpushare.NodeLabelKey: gpushare.NodeLabelValue, LabelHostname: n.Name}
	if n.Model != "" {
		labels[LabelGPUProduct] = ProductLabel(n.Model)
	}
	maps.Copy(labels, n.Labels)
	for k, v := range labels {
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, fmt.Errorf("building node %s: label %s=%q: %s", n.Name, k, v, strings.Join(errs, "; "))
		}
	}
	annotations := map[string]string{gpushare.AnnotationNodeInventory: invJSON}
	maps.Copy(annotations, n.Annotations)
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels, Annotations: annotations},
		Spec:       corev1.NodeSpec{Taints: n.Taints},
		Status:     corev1.NodeStatus{Capacity: capacity, Allocatable: capacity.DeepCopy()},
	}
	if n.Ready {
		now := metav1.Now()
		node.Status.Conditions = []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "Benchmark",
			Message: "created Ready: no kubelet heartbeats this node", LastHeartbeatTime: now, LastTransitionTime: now,
		}}
	}
	return node, nil
}

// ProductLabel is the LabelGPUProduct value of a card model, as NVIDIA's GPU feature
// discovery writes it: every character a label value cannot hold becomes '-'
// ("NVIDIA A100-SXM4-80GB" → "NVIDIA-A100-SXM4-80GB"). Trace model names ("V100M16") pass
// through unchanged.
func ProductLabel(model string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '-'
	}, model)
}

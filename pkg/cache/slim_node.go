package cache

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// slimNode is what the node informer stores instead of a *corev1.Node: the name and the
// parsed card inventory (a real node also carries images, conditions and managedFields, tens
// of KB each) and its allocatable CPU and memory. Never modified once built.
type slimNode struct {
	objectMeta
	// inv is gpushare.Resources.NodeInventory's answer, devices sorted by index; invErr is
	// its error (the fallback inventory is still usable, see onNode, unless invErr is a
	// *gpushare.RangeError: then inv has no cards and the node takes no GPU pod).
	inv    gpushare.Inventory
	src    gpushare.InventorySource
	invErr error
	// alloc is allocatable CPU (millicores) and memory (MiB, rounded down).
	alloc policy.Host
	// iso is the node's isolation mode (gpushare.NodeIsolation); isoErr its error for an
	// invalid label value.
	iso    gpushare.Isolation
	isoErr error
	// labels are the node's labels (the object's map, shared), kept with
	// Config.TrackWorkload only: the pods' node constraints are matched against them.
	labels map[string]string
}

var _ runtime.Object = (*slimNode)(nil)

// newSlimNode derives the slim node; withLabels keeps its labels.
func newSlimNode(node *corev1.Node, res gpushare.Resources, withLabels bool) *slimNode {
	n := &slimNode{objectMeta: metaOf(&node.ObjectMeta), alloc: nodeHost(node)}
	if withLabels {
		n.labels = node.Labels
	}
	n.inv, n.src, n.invErr = res.NodeInventory(node)
	n.iso, n.isoErr = gpushare.NodeIsolation(node.Labels)
	// The inventory was just parsed for this node alone: sorting it in place is safe, and
	// lets nodeState share the devices instead of copying them.
	slices.SortFunc(n.inv.Devices, func(a, b gpushare.Device) int { return a.Index - b.Index })
	for i := range n.inv.Devices {
		n.inv.Devices[i].Model = intern(n.inv.Devices[i].Model)
	}
	return n
}

// nodeTransform is the node informer's transform: *corev1.Node in, *slimNode out (with its
// labels when withLabels), anything else unchanged (so it is idempotent).
func nodeTransform(res gpushare.Resources, withLabels bool) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		if node, ok := obj.(*corev1.Node); ok {
			return newSlimNode(node, res, withLabels), nil
		}
		return obj, nil
	}
}

// nodeHost is the node's allocatable CPU (millicores) and memory (MiB, rounded down).
func nodeHost(node *corev1.Node) policy.Host {
	a := node.Status.Allocatable
	return policy.Host{CPUMilli: a.Cpu().MilliValue(), MemoryMiB: a.Memory().Value() >> 20}
}

// GetObjectKind implements runtime.Object: a slim node carries no type metadata.
func (n *slimNode) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (n *slimNode) DeepCopyObject() runtime.Object {
	out := *n
	out.inv.Devices = slices.Clone(n.inv.Devices)
	out.labels = maps.Clone(n.labels)
	return &out
}

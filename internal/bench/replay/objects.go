package replay

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

const (
	// LabelGPUProduct is the standard GPU model label (NVIDIA GPU feature discovery); pods
	// with a gpu_spec get a required node affinity on it.
	LabelGPUProduct = "nvidia.com/gpu.product"
	// LabelReplay marks the nodes and pods the replay created, so its informers and clean-up
	// touch nothing else.
	LabelReplay = "gpushare.io/replay"
	// annotationKwokNode makes kwok manage the node (kwok --manage-nodes-with-annotation-selector).
	annotationKwokNode = "kwok.x-k8s.io/node"
	// NodePodCapacity is each node's pods capacity: high enough that only cpu, memory and
	// GPU decide what fits.
	NodePodCapacity = 1000
	// placeholderImage is never pulled: kwok runs no containers.
	placeholderImage = "registry.k8s.io/pause:3.10"
)

// Objects builds the Kubernetes objects of a replay.
type Objects struct {
	Units     Units
	Resources gpushare.Resources
	Namespace string
}

// Node returns the kwok node for a trace node: labels cgpu=true, nvidia.com/gpu.product and
// LabelReplay; annotation kwok.x-k8s.io/node=fake and the per-card inventory; capacity and
// allocatable cpu, memory, pods, gpu-count and gpu-mem (cards × CardUnits). Errors: a node
// name that is not a valid Kubernetes name.
func (o Objects) Node(n NodeSpec) (*corev1.Node, error) {
	if errs := validation.IsDNS1123Subdomain(n.Name); len(errs) > 0 {
		return nil, fmt.Errorf("node %q: not a valid node name: %s", n.Name, strings.Join(errs, "; "))
	}
	per := o.Units.CardUnits(n.Model)
	inv := gpushare.Inventory{Unit: o.Units.Unit(n.Model)}
	for i := 0; i < n.GPUs; i++ {
		inv.Devices = append(inv.Devices, gpushare.Device{
			Index:     i,
			UUID:      fmt.Sprintf("GPU-%s-%d", n.Name, i),
			Model:     n.Model,
			Units:     per,
			MemoryMiB: modelMemoryMiB[n.Model],
			Healthy:   true,
		})
	}
	invJSON, err := inv.Marshal()
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(n.MilliCPU, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(n.MemoryMiB<<20, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(NodePodCapacity, resource.DecimalSI),
		o.Resources.Count:     *resource.NewQuantity(int64(n.GPUs), resource.DecimalSI),
		o.Resources.Mem:       *resource.NewQuantity(int64(n.GPUs)*per, resource.DecimalSI),
	}
	labels := map[string]string{
		gpushare.NodeLabelKey:    gpushare.NodeLabelValue,
		LabelReplay:              "true",
		"kubernetes.io/hostname": n.Name,
		"type":                   "kwok",
	}
	if n.Model != "" {
		labels[LabelGPUProduct] = n.Model
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   n.Name,
			Labels: labels,
			Annotations: map[string]string{
				annotationKwokNode:               "fake",
				gpushare.AnnotationNodeInventory: invJSON,
			},
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity.DeepCopy(),
		},
	}, nil
}

// Pod returns the pod for a trace pod: one container requesting cpu and memory, and for GPU
// pods gpu-mem = units per card × num_gpu plus gpu-count = num_gpu when above 1 (absent
// means 1); a gpu_spec becomes a required node affinity on LabelGPUProduct. The name is the
// trace name in lower case. Errors: a name that is not a valid pod name.
func (o Objects) Pod(p PodSpec) (*corev1.Pod, error) {
	name := strings.ToLower(strings.ReplaceAll(p.Name, "_", "-"))
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, fmt.Errorf("pod %q: not a valid pod name: %s", p.Name, strings.Join(errs, "; "))
	}
	req := corev1.ResourceList{}
	if p.MilliCPU > 0 {
		req[corev1.ResourceCPU] = *resource.NewMilliQuantity(p.MilliCPU, resource.DecimalSI)
	}
	if p.MemoryMiB > 0 {
		req[corev1.ResourceMemory] = *resource.NewQuantity(p.MemoryMiB<<20, resource.BinarySI)
	}
	limits := corev1.ResourceList{}
	if p.NumGPU > 0 {
		limits[o.Resources.Mem] = *resource.NewQuantity(o.Units.PodUnitsPerCard(p)*int64(p.NumGPU), resource.DecimalSI)
		if p.NumGPU > 1 {
			limits[o.Resources.Count] = *resource.NewQuantity(int64(p.NumGPU), resource.DecimalSI)
		}
		for k, v := range limits {
			req[k] = v
		}
	}
	var grace int64
	noToken := false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: o.Namespace,
			Labels:    map[string]string{LabelReplay: "true"},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:      "main",
				Image:     placeholderImage,
				Resources: corev1.ResourceRequirements{Requests: req},
			}},
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &grace,
			AutomountServiceAccountToken:  &noToken,
		},
	}
	if len(limits) > 0 {
		pod.Spec.Containers[0].Resources.Limits = limits
	}
	if len(p.GPUSpec) > 0 {
		pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{
						Key:      LabelGPUProduct,
						Operator: corev1.NodeSelectorOpIn,
						Values:   append([]string(nil), p.GPUSpec...),
					}},
				}},
			},
		}}
	}
	return pod, nil
}

package replay

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gpushare/gpushare/internal/bench/objects"
	"github.com/gpushare/gpushare/pkg/gpushare"
)

const (
	// LabelReplay marks the nodes and pods the replay created, so its informers and clean-up
	// touch nothing else.
	LabelReplay = "gpushare.io/replay"
	// annotationKwokNode makes kwok manage the node (kwok --manage-nodes-with-annotation-selector).
	annotationKwokNode = "kwok.x-k8s.io/node"
	// NodePodCapacity is each node's pods capacity: high enough that only cpu, memory and
	// GPU decide what fits.
	NodePodCapacity = 1000
)

// Objects builds the Kubernetes objects of a replay.
type Objects struct {
	Units     Units
	Resources gpushare.Resources
	Namespace string
	// SchedulerName is every pod's spec.schedulerName: empty for the cluster's default
	// scheduler (with the extender), "gpushare-scheduler" to replay through the plugin.
	SchedulerName string
	// DRA serves the cards through DRA: each node's ResourceSlice and each GPU pod's
	// ResourceClaim instead of gpu-mem (draNode, draPod).
	DRA bool
}

// Node returns the kwok node for a trace node: labels LabelReplay and type=kwok, annotation
// kwok.x-k8s.io/node=fake, and the GPU-sharing node objects.Node builds with the trace
// node's cpu, memory and cards. Errors: a node name that is not a valid Kubernetes name.
func (o Objects) Node(n NodeSpec) (*corev1.Node, error) {
	if errs := validation.IsDNS1123Subdomain(n.Name); len(errs) > 0 {
		return nil, fmt.Errorf("node %q: not a valid node name: %s", n.Name, strings.Join(errs, "; "))
	}
	return objects.Node{
		Name:          n.Name,
		Model:         n.Model,
		Cards:         n.GPUs,
		CardUnits:     o.Units.CardUnits(n.Model),
		Unit:          o.Units.Unit(n.Model),
		CardMemoryMiB: modelMemoryMiB[n.Model],
		MilliCPU:      n.MilliCPU,
		MemoryMiB:     n.MemoryMiB,
		MaxPods:       NodePodCapacity,
		Labels:        map[string]string{LabelReplay: "true", "type": "kwok"},
		Annotations:   map[string]string{annotationKwokNode: "fake"},
	}.Build(o.Resources)
}

// Pod returns the pod for a trace pod: cpu and memory requests, and for GPU pods gpu-mem =
// units per card × num_gpu (and gpu-count = num_gpu); a gpu_spec becomes a required node
// affinity on objects.LabelGPUProduct. The name is the trace name in lower case. Errors: a
// name that is not a valid pod name.
func (o Objects) Pod(p PodSpec) (*corev1.Pod, error) {
	name := strings.ToLower(strings.ReplaceAll(p.Name, "_", "-"))
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, fmt.Errorf("pod %q: not a valid pod name: %s", p.Name, strings.Join(errs, "; "))
	}
	spec := objects.Pod{
		Name: name, Namespace: o.Namespace, Labels: map[string]string{LabelReplay: "true"},
		MilliCPU: p.MilliCPU, MemoryMiB: p.MemoryMiB, SchedulerName: o.SchedulerName,
	}
	if p.NumGPU > 0 {
		spec.Units, spec.Cards = o.Units.PodUnitsPerCard(p)*int64(p.NumGPU), int64(p.NumGPU)
	}
	pod := spec.Build(o.Resources)
	if len(p.GPUSpec) > 0 {
		// The node labels carry objects.ProductLabel of the model: the same mapping here, so
		// selector and label agree for any model name.
		models := make([]string, len(p.GPUSpec))
		for i, m := range p.GPUSpec {
			models[i] = objects.ProductLabel(m)
		}
		pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{
						Key:      objects.LabelGPUProduct,
						Operator: corev1.NodeSelectorOpIn,
						Values:   models,
					}},
				}},
			},
		}}
	}
	return pod, nil
}

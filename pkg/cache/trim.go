package cache

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// TrimPod returns an informer transform that keeps only what the cache and bind read:
// identity, creation/deletion time, the gpushare annotations, spec.nodeName, each
// container's name, restartPolicy and gpu-mem/gpu-count/cpu/memory resources, pod-level
// resources and overhead (host accounting), and status.phase.
// At 40,000 pods this is the difference between megabytes and gigabytes of informer store.
// Objects that are not pods (tombstones) pass through unchanged.
func TrimPod(res gpushare.Resources) toolscache.TransformFunc {
	keys := gpushare.BindAnnotationKeys()
	return func(obj any) (any, error) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return obj, nil
		}
		var ann map[string]string
		for _, k := range keys {
			if v, has := pod.Annotations[k]; has {
				if ann == nil {
					ann = make(map[string]string, len(keys))
				}
				ann[k] = v
			}
		}
		return &corev1.Pod{
			TypeMeta: pod.TypeMeta,
			ObjectMeta: metav1.ObjectMeta{
				Name:              pod.Name,
				Namespace:         pod.Namespace,
				UID:               pod.UID,
				ResourceVersion:   pod.ResourceVersion,
				CreationTimestamp: pod.CreationTimestamp,
				DeletionTimestamp: pod.DeletionTimestamp,
				Annotations:       ann,
			},
			Spec: corev1.PodSpec{
				NodeName:       pod.Spec.NodeName,
				Containers:     trimContainers(pod.Spec.Containers, res),
				InitContainers: trimContainers(pod.Spec.InitContainers, res),
				Resources:      pod.Spec.Resources,
				Overhead:       pod.Spec.Overhead,
			},
			Status: corev1.PodStatus{Phase: pod.Status.Phase},
		}, nil
	}
}

func trimContainers(in []corev1.Container, res gpushare.Resources) []corev1.Container {
	if len(in) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(in))
	for i := range in {
		out[i] = corev1.Container{
			Name:          in[i].Name,
			RestartPolicy: in[i].RestartPolicy,
			Resources: corev1.ResourceRequirements{
				Limits:   keepResources(in[i].Resources.Limits, res),
				Requests: keepResources(in[i].Resources.Requests, res),
			},
		}
	}
	return out
}

// keepResources keeps only the gpu-mem, gpu-count, cpu and memory entries (nil when none is
// set).
func keepResources(in corev1.ResourceList, res gpushare.Resources) corev1.ResourceList {
	var out corev1.ResourceList
	for _, name := range []corev1.ResourceName{res.Mem, res.Count, corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := in[name]; ok {
			if out == nil {
				out = corev1.ResourceList{}
			}
			out[name] = q
		}
	}
	return out
}

// TrimNode returns an informer transform that keeps only what the cache reads from a node:
// identity, labels, the gpushare inventory annotation and allocatable gpu-mem, gpu-count, cpu
// and memory. A real node also carries its image list, conditions and managedFields — tens of
// KB each, megabytes over thousands of nodes. Objects that are not nodes pass through.
func TrimNode(res gpushare.Resources) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		node, ok := obj.(*corev1.Node)
		if !ok {
			return obj, nil
		}
		var ann map[string]string
		if v, has := node.Annotations[gpushare.AnnotationNodeInventory]; has {
			ann = map[string]string{gpushare.AnnotationNodeInventory: v}
		}
		return &corev1.Node{
			TypeMeta: node.TypeMeta,
			ObjectMeta: metav1.ObjectMeta{
				Name:              node.Name,
				UID:               node.UID,
				ResourceVersion:   node.ResourceVersion,
				CreationTimestamp: node.CreationTimestamp,
				DeletionTimestamp: node.DeletionTimestamp,
				Labels:            node.Labels,
				Annotations:       ann,
			},
			Status: corev1.NodeStatus{Allocatable: keepResources(node.Status.Allocatable, res)},
		}, nil
	}
}

package objects

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// Pod describes a one-container pod. Zero quantities are not requested.
type Pod struct {
	Name      string
	Namespace string
	Labels    map[string]string
	MilliCPU  int64
	MemoryMiB int64
	Units     int64 // gpu-mem in total
	Cards     int64 // gpu-count; asked for only above 1, as most pod specs leave it out
	// SchedulerName hands the pod to a second scheduler (gpushare-scheduler); empty: the
	// cluster's default scheduler.
	SchedulerName string
}

// Build returns the pod: cpu and memory requests, gpu-mem (and gpu-count) limits under
// res's names, repeated as requests as the API server's defaulting would, and no kubelet
// concerns (grace 0, no service account token, never restarted).
func (p Pod) Build(res gpushare.Resources) *corev1.Pod {
	req, limits := corev1.ResourceList{}, corev1.ResourceList{}
	if p.MilliCPU > 0 {
		req[corev1.ResourceCPU] = *resource.NewMilliQuantity(p.MilliCPU, resource.DecimalSI)
	}
	if p.MemoryMiB > 0 {
		req[corev1.ResourceMemory] = *resource.NewQuantity(p.MemoryMiB<<20, resource.BinarySI)
	}
	if p.Units > 0 {
		limits[res.Mem] = *resource.NewQuantity(p.Units, resource.DecimalSI)
		if p.Cards > 1 {
			limits[res.Count] = *resource.NewQuantity(p.Cards, resource.DecimalSI)
		}
		maps.Copy(req, limits)
	}
	var grace int64
	noToken := false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: maps.Clone(p.Labels)},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "main", Image: placeholderImage,
				Resources: corev1.ResourceRequirements{Requests: req},
			}},
			SchedulerName:                 p.SchedulerName,
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &grace,
			AutomountServiceAccountToken:  &noToken,
		},
	}
	if len(limits) > 0 {
		pod.Spec.Containers[0].Resources.Limits = limits
	}
	return pod
}

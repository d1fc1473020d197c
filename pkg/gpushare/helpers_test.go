package gpushare

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ctr builds a container with gpu-mem mem and, when cards > 0, gpu-count cards as limits.
func ctr(name string, mem, cards int64) corev1.Container {
	l := corev1.ResourceList{}
	if mem != 0 {
		l[DefaultMemResource] = *resource.NewQuantity(mem, resource.DecimalSI)
	}
	if cards != 0 {
		l[DefaultCountResource] = *resource.NewQuantity(cards, resource.DecimalSI)
	}
	return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Limits: l}}
}

func sidecar(c corev1.Container) corev1.Container {
	always := corev1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

func pod(ann map[string]string, inits []corev1.Container, apps ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Annotations: ann},
		Spec:       corev1.PodSpec{InitContainers: inits, Containers: apps},
	}
}

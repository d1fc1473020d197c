package dra

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// checkDevicePluginPods refuses to start the DRA back end on a node whose pods still hold
// memory through the device-plugin back end: their gpu-mem (memResource) was counted by
// the device plugin and the scheduler extender, and nothing of it is in this plugin's
// checkpoint or the node's ResourceSlice, so the DRA scheduler would hand the same memory
// out again. A pod holds memory while it is bound to node, not Succeeded or Failed, and one
// of its containers or init containers requests or limits memResource; one whose extended
// resource kube-scheduler serves from DRA devices (status.extendedResourceClaimStatus)
// holds a claim, not device-plugin memory. The error names the pods and says to drain the
// node. Errors also: the node's pods cannot be listed.
func checkDevicePluginPods(ctx context.Context, client kubernetes.Interface, node string, memResource corev1.ResourceName) error {
	list, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return fmt.Errorf("listing the pods of node %s to check none holds %s through the device plugin: %w", node, memResource, err)
	}
	var held []string
	for i := range list.Items {
		pod := &list.Items[i]
		if pod.Spec.NodeName == node && holdsDevicePluginMemory(pod, memResource) {
			held = append(held, klog.KObj(pod).String())
		}
	}
	if len(held) == 0 {
		return nil
	}
	slices.Sort(held)
	return fmt.Errorf("node %s is labelled for the DRA back end but pods %s on it still hold %s through the device-plugin back end: drain the node first (kubectl drain %s --ignore-daemonsets), then start the DRA plugin",
		node, strings.Join(held, ", "), memResource, node)
}

// holdsDevicePluginMemory reports whether pod, live, has a container or init container
// that requests or limits memResource from the device plugin.
func holdsDevicePluginMemory(pod *corev1.Pod, memResource corev1.ResourceName) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || pod.Status.ExtendedResourceClaimStatus != nil {
		return false
	}
	asks := func(c corev1.Container) bool {
		_, req := c.Resources.Requests[memResource]
		_, lim := c.Resources.Limits[memResource]
		return req || lim
	}
	return slices.ContainsFunc(pod.Spec.InitContainers, asks) || slices.ContainsFunc(pod.Spec.Containers, asks)
}

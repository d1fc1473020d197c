package inspect

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// pageSize bounds each LIST so a large cluster is read in chunks, not one huge response.
const pageSize = 500

// Field selectors. The API server evaluates them, so only the pods that can hold gpu-mem
// travel; spec.nodeName is indexed in the watch cache.
const (
	// selectorNonTerminated skips finished pods, whose memory is free again.
	selectorNonTerminated = "status.phase!=Succeeded,status.phase!=Failed"
	// selectorUnscheduled is what kube-scheduler itself lists as waiting.
	selectorUnscheduled = "spec.nodeName=,status.phase=Pending"
	// selectorFailedScheduling picks the scheduler's reasons only.
	selectorFailedScheduling = "reason=" + reasonFailedScheduling
)

// podsOnNodeSelector restricts selectorNonTerminated to one node.
func podsOnNodeSelector(node string) string {
	return "spec.nodeName=" + fields.EscapeValue(node) + "," + selectorNonTerminated
}

// listNodes returns every node (nodes are few next to pods; the sharing filter needs
// labels, annotations and allocatable, so it runs here rather than on the server).
func listNodes(ctx context.Context, cs kubernetes.Interface) ([]corev1.Node, error) {
	var out []corev1.Node
	opts := metav1.ListOptions{Limit: pageSize}
	for {
		l, err := cs.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing nodes: %w", err)
		}
		out = append(out, l.Items...)
		if l.Continue == "" {
			return out, nil
		}
		opts.Continue = l.Continue
	}
}

// getNode reads one node by name.
func getNode(ctx context.Context, cs kubernetes.Interface, name string) (*corev1.Node, error) {
	n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("getting node %q: %w", name, err)
	}
	return n, nil
}

// listActivePods returns the non-terminated pods of all namespaces, of one node when node
// is not empty.
func listActivePods(ctx context.Context, cs kubernetes.Interface, node string) ([]corev1.Pod, error) {
	sel := selectorNonTerminated
	if node != "" {
		sel = podsOnNodeSelector(node)
	}
	pods, err := listPods(ctx, cs, metav1.NamespaceAll, sel)
	if err != nil {
		return nil, fmt.Errorf("listing non-terminated pods: %w", err)
	}
	return pods, nil
}

// listUnscheduledPods returns the Pending pods not yet bound to a node, of namespace ns
// (all namespaces when empty).
func listUnscheduledPods(ctx context.Context, cs kubernetes.Interface, ns string) ([]corev1.Pod, error) {
	pods, err := listPods(ctx, cs, ns, selectorUnscheduled)
	if err != nil {
		return nil, fmt.Errorf("listing unscheduled pods: %w", err)
	}
	return pods, nil
}

func listPods(ctx context.Context, cs kubernetes.Interface, ns, selector string) ([]corev1.Pod, error) {
	var out []corev1.Pod
	opts := metav1.ListOptions{FieldSelector: selector, Limit: pageSize}
	for {
		l, err := cs.CoreV1().Pods(ns).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		out = append(out, l.Items...)
		if l.Continue == "" {
			return out, nil
		}
		opts.Continue = l.Continue
	}
}

// listFailedSchedulingEvents returns the FailedScheduling events of namespace ns (all
// namespaces when empty). One LIST for all pending pods, rather than one per pod: the API
// server filters on reason, and the scheduler de-duplicates these events per pod.
func listFailedSchedulingEvents(ctx context.Context, cs kubernetes.Interface, ns string) ([]corev1.Event, error) {
	var out []corev1.Event
	opts := metav1.ListOptions{FieldSelector: selectorFailedScheduling, Limit: pageSize}
	for {
		l, err := cs.CoreV1().Events(ns).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing %s events: %w", reasonFailedScheduling, err)
		}
		out = append(out, l.Items...)
		if l.Continue == "" {
			return out, nil
		}
		opts.Continue = l.Continue
	}
}

// selectorDRADriver keeps the gpushare driver's ResourceSlices (spec.driver is a field
// the API server selects on).
const selectorDRADriver = "spec.driver=" + gpushare.DRADriverName

// listResourceSlices returns the gpushare driver's ResourceSlices.
func listResourceSlices(ctx context.Context, cs kubernetes.Interface) ([]resourceapi.ResourceSlice, error) {
	var out []resourceapi.ResourceSlice
	opts := metav1.ListOptions{FieldSelector: selectorDRADriver, Limit: pageSize}
	for {
		l, err := cs.ResourceV1().ResourceSlices().List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing %s ResourceSlices: %w", gpushare.DRADriverName, err)
		}
		out = append(out, l.Items...)
		if l.Continue == "" {
			return out, nil
		}
		opts.Continue = l.Continue
	}
}

// listResourceClaims returns the ResourceClaims of all namespaces (no field selects the
// allocated ones, so readDRANode picks them).
func listResourceClaims(ctx context.Context, cs kubernetes.Interface) ([]resourceapi.ResourceClaim, error) {
	var out []resourceapi.ResourceClaim
	opts := metav1.ListOptions{Limit: pageSize}
	for {
		l, err := cs.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing ResourceClaims: %w", err)
		}
		out = append(out, l.Items...)
		if l.Continue == "" {
			return out, nil
		}
		opts.Continue = l.Continue
	}
}

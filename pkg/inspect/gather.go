package inspect

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// Which reads each form needs, on top of the single requests of fetch.go.

// perNodeListMax: with at most this many sharing nodes, pods are listed node by node
// (spec.nodeName is indexed); above it one cluster-wide list of non-terminated pods is
// cheaper than that many requests.
const perNodeListMax = 10

// fetchModel reads the sharing nodes (or the one named) and the non-terminated pods bound
// to them, and builds the model.
func fetchModel(ctx context.Context, cs kubernetes.Interface, node string, res gpushare.Resources) (model, error) {
	nodes, pods, err := fetchSharing(ctx, cs, node, res)
	if err != nil {
		return model{}, err
	}
	dra, err := fetchDRA(ctx, cs, nodes)
	if err != nil {
		return model{}, err
	}
	return buildModel(nodes, pods, dra, res), nil
}

// fetchSharing reads the sharing nodes (or the one named, which must share GPUs) and the
// non-terminated pods bound to them.
func fetchSharing(ctx context.Context, cs kubernetes.Interface, node string, res gpushare.Resources) ([]corev1.Node, []corev1.Pod, error) {
	var nodes []corev1.Node
	if node != "" {
		n, err := getNode(ctx, cs, node)
		if apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("node %q not found", node)
		}
		if err != nil {
			return nil, nil, err
		}
		if !isSharingNode(n, res) {
			return nil, nil, fmt.Errorf("node %q %w (no %s=%s label, no %s annotation, no allocatable %s)",
				node, errNotSharingNode, gpushare.NodeLabelKey, gpushare.NodeLabelValue, gpushare.AnnotationNodeInventory, res.Mem)
		}
		nodes = []corev1.Node{*n}
	} else {
		all, err := listNodes(ctx, cs)
		if err != nil {
			return nil, nil, err
		}
		for i := range all {
			if isSharingNode(&all[i], res) {
				nodes = append(nodes, all[i])
			}
		}
		if len(nodes) == 0 {
			return nil, nil, fmt.Errorf("%w (no node has the %s=%s label, the %s annotation or allocatable %s)",
				errNoSharingNodes, gpushare.NodeLabelKey, gpushare.NodeLabelValue, gpushare.AnnotationNodeInventory, res.Mem)
		}
	}
	pods, err := podsOf(ctx, cs, nodes)
	if err != nil {
		return nil, nil, err
	}
	klog.V(2).InfoS("Read cluster", "nodes", len(nodes), "pods", len(pods))
	return nodes, pods, nil
}

// podsOf lists the non-terminated pods that can sit on nodes: node by node for a few nodes,
// else once for the whole cluster.
func podsOf(ctx context.Context, cs kubernetes.Interface, nodes []corev1.Node) ([]corev1.Pod, error) {
	if len(nodes) > perNodeListMax {
		return listActivePods(ctx, cs, "")
	}
	var pods []corev1.Pod
	for _, n := range nodes {
		p, err := listActivePods(ctx, cs, n.Name)
		if err != nil {
			return nil, err
		}
		pods = append(pods, p...)
	}
	return pods, nil
}

// fetchDRA reads the gpushare driver's ResourceSlices and every namespace's ResourceClaims
// when one of nodes is served by the DRA back end; nothing otherwise, so clusters without
// DRA nodes need no rights on them.
func fetchDRA(ctx context.Context, cs kubernetes.Interface, nodes []corev1.Node) (draObjects, error) {
	if !slices.ContainsFunc(nodes, func(n corev1.Node) bool { return isDRANode(n.Labels) }) {
		return draObjects{}, nil
	}
	sl, err := listResourceSlices(ctx, cs)
	if err != nil {
		return draObjects{}, err
	}
	cl, err := listResourceClaims(ctx, cs)
	if err != nil {
		return draObjects{}, err
	}
	return draObjects{Slices: sl, Claims: cl}, nil
}

// fetchPending reads the unscheduled pods (of -n's namespace, else all) and, when some of
// them wait for gpu-mem, the FailedScheduling events of their namespace (one namespace) or
// of all namespaces (several).
func fetchPending(ctx context.Context, c cluster, res gpushare.Resources) (pendingModel, error) {
	pods, err := listUnscheduledPods(ctx, c.Client, c.Namespace)
	if err != nil {
		return pendingModel{}, err
	}
	m := buildPending(pods, nil, res)
	if len(m.Pending) == 0 {
		return m, nil
	}
	ns := m.Pending[0].Namespace
	for _, p := range m.Pending[1:] {
		if p.Namespace != ns {
			ns = corev1.NamespaceAll
			break
		}
	}
	events, err := listFailedSchedulingEvents(ctx, c.Client, ns)
	if err != nil {
		return pendingModel{}, err
	}
	return buildPending(pods, events, res), nil
}

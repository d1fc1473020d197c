package inspect

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/probe"
)

// verifyRun is one --verify run: where its pods go, what they run, how long it waits.
type verifyRun struct {
	Client    cluster
	Namespace string
	Image     string
	Mem       corev1.ResourceName
	// ID labels the run's pods (gpushare.LabelVerifyRun) and names them.
	ID string
	// Timeout bounds the wait for the pods to finish, Interval is how often it looks.
	Timeout, Interval time.Duration
}

// cleanupTimeout bounds the deletion of the probe pods, which runs even when the command's
// context is cancelled (Ctrl-C).
const cleanupTimeout = 30 * time.Second

// runVerify places one probe pod on each node of nodes (every GPU-sharing node when empty),
// waits for them, reads both containers' results from their logs, deletes the pods whatever
// happened, and prints the table. It returns an exitError with status 1 when a node is NOT
// enforced, 2 when none is but one could not be verified.
func runVerify(ctx context.Context, flags *flagpole, nodes []string, r verifyRun, streams genericiooptions.IOStreams) (err error) {
	targets, rows, err := verifyTargets(ctx, r.Client.Client, nodes, flags.resources())
	if err != nil {
		return exitError{code: exitCheckIncomplete, err: explain(err)}
	}
	created := make(map[string]probeTarget, len(targets))
	defer func() {
		if cerr := r.cleanup(ctx, created); cerr != nil {
			fmt.Fprintf(streams.ErrOut, "warning: %v\n", cerr)
		}
	}()
	for i, t := range targets {
		p := probePod(r.Namespace, r.ID, i, t, r.Image, r.Mem)
		if _, err := r.Client.Client.CoreV1().Pods(r.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			// Not explain: a 403 here is as often Pod Security or a quota as RBAC, and the
			// API's message says which.
			return exitError{code: exitCheckIncomplete, err: oneLineErr{fmt.Errorf("creating probe pod %s/%s for node %s: %w", r.Namespace, p.Name, t.Node, err)}}
		}
		created[p.Name] = t
	}
	pods, err := r.wait(ctx, created)
	if err != nil {
		return exitError{code: exitCheckIncomplete, err: explain(err)}
	}
	for name, t := range created {
		rows = append(rows, r.row(ctx, t, pods[name]))
	}
	report := newVerifyReport(rows)
	if err := render(streams.Out, flags, report, renderVerify); err != nil {
		return exitError{code: exitCheckIncomplete, err: fmt.Errorf("writing the table: %w", err)}
	}
	return report.err()
}

// verifyTargets reads the nodes to verify: those named (each must exist and share GPUs), or
// every GPU-sharing node. A node served by the DRA back end, or whose isolation label
// does not parse, gets a row of its own instead of a pod: the probe asks for gpu-mem, which
// such a node does not serve (a bad label refuses every GPU pod).
func verifyTargets(ctx context.Context, cs kubernetes.Interface, names []string, res gpushare.Resources) ([]probeTarget, []verifyRow, error) {
	nodes, err := verifyNodes(ctx, cs, names, res)
	if err != nil {
		return nil, nil, err
	}
	var targets []probeTarget
	var rows []verifyRow
	for i := range nodes {
		n := &nodes[i]
		t := probeTarget{Node: n.Name, Isolation: n.Labels[gpushare.LabelIsolation], Enforced: n.Labels[gpushare.LabelIsolationEnforced]}
		switch _, perr := probe.PromiseOf(t.Isolation, t.Enforced); {
		case isDRANode(n.Labels):
			rows = append(rows, skippedRow(t, "served by the DRA back end: the probe requests gpu-mem, not a ResourceClaim"))
		case perr != nil:
			rows = append(rows, skippedRow(t, perr.Error()+" (the node refuses GPU pods until it is fixed)"))
		default:
			inv, _, _ := res.NodeInventory(n)
			t.Unit = inv.Unit
			if t.Isolation == string(gpushare.IsolationMPS) {
				t.ComputeShare = probeComputeShare(ctx, cs, n, res)
			}
			targets = append(targets, t)
		}
	}
	return targets, rows, nil
}

// probeComputeShare is the compute share, in percent, the probe on an mps node must ask for
// to be placed at all: a card holds pods with compute shares or pods without, never both
// (gpushare.AnnotationComputeShare), so on a node where every card with a free unit already
// holds shares a probe without one would wait until --verify-timeout. 0 (no share) when a
// card without shares has a free unit, when no card has room for one more share either (the
// probe then waits and its row says why), or when the node's pods cannot be listed.
func probeComputeShare(ctx context.Context, cs kubernetes.Interface, n *corev1.Node, res gpushare.Resources) int {
	pods, err := listActivePods(ctx, cs, n.Name)
	if err != nil {
		return 0
	}
	var on []*corev1.Pod
	for i := range pods {
		if pods[i].Spec.NodeName == n.Name {
			on = append(on, &pods[i])
		}
	}
	share := 0
	for _, c := range buildNode(n, on, draObjects{}, res).Cards {
		switch {
		case !c.Healthy || c.Missing || c.Total-c.Allocated < 1:
		case c.Compute == 0:
			return 0
		case c.Compute+gpushare.ComputeShareStep <= gpushare.MaxComputeShare:
			share = gpushare.ComputeShareStep
		}
	}
	return share
}

// verifyNodes reads the nodes named, or lists the GPU-sharing ones. Errors: a node named
// that does not exist or does not share GPUs, no GPU-sharing node at all, the API's.
func verifyNodes(ctx context.Context, cs kubernetes.Interface, names []string, res gpushare.Resources) ([]corev1.Node, error) {
	if len(names) == 0 {
		all, err := listNodes(ctx, cs)
		if err != nil {
			return nil, err
		}
		var nodes []corev1.Node
		for i := range all {
			if isSharingNode(&all[i], res) {
				nodes = append(nodes, all[i])
			}
		}
		if len(nodes) == 0 {
			return nil, errNoSharingNodes
		}
		return nodes, nil
	}
	nodes := make([]corev1.Node, 0, len(names))
	for _, name := range slices.Compact(slices.Sorted(slices.Values(names))) {
		n, err := getNode(ctx, cs, name)
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("node %q not found", name)
		}
		if err != nil {
			return nil, err
		}
		if !isSharingNode(n, res) {
			return nil, fmt.Errorf("node %q %w", name, errNotSharingNode)
		}
		nodes = append(nodes, *n)
	}
	return nodes, nil
}

// cleanup deletes the pods created, on a context of its own: an interrupted run still
// removes them. Errors: the pods it could not delete, with the command that would.
func (r verifyRun) cleanup(ctx context.Context, created map[string]probeTarget) error {
	if len(created) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	var failed []string
	for name := range created {
		err := r.Client.Client.CoreV1().Pods(r.Namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		if err != nil && !apierrors.IsNotFound(err) {
			failed = append(failed, fmt.Sprintf("%s (%v)", name, err))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("probe pods not deleted: %v; delete them with kubectl delete pods -n %s -l %s=%s", failed, r.Namespace, gpushare.LabelVerifyRun, r.ID)
	}
	return nil
}

package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/internal/bench/parallel"
)

// driver replays a workload against a real API server: kube-scheduler (with the gpushare
// extender) places the pods, kwok plays the nodes.
type driver struct {
	Client  kubernetes.Interface
	Objects Objects
	// NodeWorkers creates nodes in parallel (default 16).
	NodeWorkers int
	// NodeReadyTimeout bounds the wait for kwok to mark every node Ready (default 5 min).
	NodeReadyTimeout time.Duration
	// PodTimeout bounds the wait for one pod to be bound or found unschedulable (default 2 min).
	PodTimeout time.Duration
	// progress receives the progress bar (nil: none).
	progress io.Writer
}

// runResult is what a cluster replay measured besides the recorder.
type runResult struct {
	Wall time.Duration // from the first pod's create to the last pod's outcome
	// E2E holds each pod's create→outcome time (bound, or unschedulable and deleted).
	E2E []time.Duration
}

// Run creates the nodes, waits until kwok made them Ready, then submits the pods one at a
// time in order: create, wait for the pod to be bound (spec.nodeName) or marked
// Unschedulable (then delete it and count it failed), record, next. The cluster must not
// already hold these nodes or pods. Errors: API failures, timeouts (naming the pod and
// its last scheduling message), ctx cancelled.
func (d *driver) Run(ctx context.Context, nodes []NodeSpec, pods []PodSpec, rec *recorder) (runResult, error) {
	var res runResult
	if err := d.ensureNamespace(ctx); err != nil {
		return res, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	tr := newTracker()
	stop, err := d.startCluster(ctx, cancel, nodes, tr.handler())
	defer stop()
	if err != nil {
		return res, err
	}

	models := make(map[string]string, len(nodes))
	for _, n := range nodes {
		models[n.Name] = n.Model
	}
	bar := newProgress(d.progress, len(pods))
	defer bar.Done()
	start := time.Now()
	res.E2E = make([]time.Duration, 0, len(pods))
	for _, p := range pods {
		t0 := time.Now()
		node, reason, err := d.submit(ctx, tr, p)
		if err != nil {
			res.Wall = time.Since(start)
			return res, err
		}
		res.E2E = append(res.E2E, time.Since(t0))
		if !d.Objects.DRA || node == "" || p.NumGPU == 0 {
			bar.Update(rec.RecordReason(p, node, reason), rec)
			continue
		}
		milli, err := d.claimedMilli(ctx, p, models[node])
		if err != nil {
			res.Wall = time.Since(start)
			return res, err
		}
		bar.Update(rec.RecordAllocated(p, node, reason, milli), rec)
	}
	res.Wall = time.Since(start)
	return res, nil
}

// startCluster watches the replay's pods (events to handler) and nodes, creates the nodes and
// waits until kwok made them Ready. stop (cancel, then wait for the informers) is returned
// also with an error. Errors: API failures, timeouts, ctx cancelled.
func (d *driver) startCluster(ctx context.Context, cancel context.CancelFunc, nodes []NodeSpec, handler cache.ResourceEventHandler) (stop func(), err error) {
	selector := labels.Set{LabelReplay: "true"}.String()
	podFactory := informers.NewSharedInformerFactoryWithOptions(d.Client, 0,
		informers.WithNamespace(d.Objects.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	podInformer := podFactory.Core().V1().Pods().Informer()
	if _, err := podInformer.AddEventHandler(handler); err != nil {
		return func() {}, fmt.Errorf("watching pods: %w", err)
	}
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(d.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	nodeLister := nodeFactory.Core().V1().Nodes().Lister()
	nodeInformer := nodeFactory.Core().V1().Nodes().Informer()
	podFactory.Start(ctx.Done())
	nodeFactory.Start(ctx.Done())
	stop = func() {
		cancel() // Shutdown waits for the informers, which stop on ctx
		podFactory.Shutdown()
		nodeFactory.Shutdown()
	}
	if !cache.WaitForCacheSync(ctx.Done(), podInformer.HasSynced, nodeInformer.HasSynced) {
		return stop, fmt.Errorf("waiting for informer caches: %w", ctx.Err())
	}
	if err := d.createNodes(ctx, nodes); err != nil {
		return stop, err
	}
	return stop, d.waitNodesReady(ctx, len(nodes), func() ([]*corev1.Node, error) { return nodeLister.List(labels.Everything()) })
}

func (d *driver) ensureNamespace(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: d.Objects.Namespace}}
	if _, err := d.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", ns.Name, err)
	}
	// Without kube-controller-manager nobody creates it, and pod creation is refused.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns.Name}}
	if _, err := d.Client.CoreV1().ServiceAccounts(ns.Name).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating service account default in %s: %w", ns.Name, err)
	}
	return nil
}

// createNodes creates the kwok nodes with NodeWorkers parallel requests.
func (d *driver) createNodes(ctx context.Context, nodes []NodeSpec) error {
	workers := d.NodeWorkers
	if workers <= 0 {
		workers = 16
	}
	objs := make([]*corev1.Node, 0, len(nodes))
	var slices []*resourceapi.ResourceSlice
	for _, n := range nodes {
		if d.Objects.DRA {
			obj, slice, err := d.Objects.draNode(n)
			if err != nil {
				return err
			}
			objs, slices = append(objs, obj), append(slices, slice)
			continue
		}
		obj, err := d.Objects.Node(n)
		if err != nil {
			return err
		}
		objs = append(objs, obj)
	}
	klog.InfoS("creating kwok nodes", "count", len(objs), "dra", d.Objects.DRA)
	if err := parallel.ForEach(ctx, len(objs), workers, func(ctx context.Context, i int) error {
		return d.createNode(ctx, objs[i])
	}); err != nil {
		return err
	}
	if d.Objects.DRA {
		return d.publishSlices(ctx, slices, workers)
	}
	return nil
}

func (d *driver) createNode(ctx context.Context, obj *corev1.Node) error {
	created, err := d.Client.CoreV1().Nodes().Create(ctx, obj, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		return fmt.Errorf("node %s already exists: the replay needs a cluster without its nodes (tear it down and start a fresh one)", obj.Name)
	case err != nil:
		return fmt.Errorf("creating node %s: %w", obj.Name, err)
	}
	if _, ok := created.Status.Allocatable[corev1.ResourceCPU]; ok {
		return nil
	}
	// The API server dropped the status on create: write it through the status subresource.
	created.Status.Capacity = obj.Status.Capacity
	created.Status.Allocatable = obj.Status.Allocatable
	if _, err := d.Client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("setting capacity of node %s: %w", obj.Name, err)
	}
	return nil
}

// taintNotReady is the taint the API server's TaintNodesByCondition admission puts on every
// new node; kube-controller-manager's node lifecycle controller lifts it once the node is
// Ready. The replay cluster runs without that controller (kwok posts no heartbeats, so it
// would taint every node unreachable), so the driver lifts it itself.
const taintNotReady = "node.kubernetes.io/not-ready"

// nodeReady: Ready=True and no taint that keeps pods off.
func nodeReady(n *corev1.Node) (bool, string) {
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return false, "taint " + t.ToString()
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return true, ""
			}
			return false, "Ready=" + string(c.Status) + " " + c.Reason
		}
	}
	return false, "no Ready condition (is kwok running?)"
}

func (d *driver) waitNodesReady(ctx context.Context, want int, list func() ([]*corev1.Node, error)) error {
	timeout := d.NodeReadyTimeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	deadline := time.Now().Add(timeout)
	lifted := map[string]bool{} // patched already; the informer may lag behind
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		nodes, err := list()
		if err != nil {
			return fmt.Errorf("listing nodes: %w", err)
		}
		ready, why := 0, ""
		var notReady []string
		for _, n := range nodes {
			ok, reason := nodeReady(n)
			if ok {
				ready++
				continue
			}
			notReady = append(notReady, n.Name)
			why = reason
			if !lifted[n.Name] {
				done, err := d.liftNotReadyTaint(ctx, n)
				if err != nil {
					return err
				}
				lifted[n.Name] = done
			}
		}
		if ready >= want {
			klog.InfoS("nodes ready", "count", ready)
			return nil
		}
		if time.Now().After(deadline) {
			sort.Strings(notReady)
			example := ""
			if len(notReady) > 0 {
				example = fmt.Sprintf("; e.g. %s: %s", notReady[0], why)
			}
			return fmt.Errorf("after %s only %d of %d nodes are ready%s", timeout, ready, want, example)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// liftNotReadyTaint removes the not-ready taint from a node whose Ready condition is True.
// done reports that the node needs nothing more (patched, or had no such taint).
func (d *driver) liftNotReadyTaint(ctx context.Context, n *corev1.Node) (done bool, err error) {
	ready := false
	for _, c := range n.Status.Conditions {
		ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
	}
	if !ready {
		return false, nil
	}
	keep := []corev1.Taint{}
	found := false
	for _, t := range n.Spec.Taints {
		if t.Key == taintNotReady {
			found = true
			continue
		}
		keep = append(keep, t)
	}
	if !found {
		return true, nil
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"taints": keep}})
	if err != nil {
		return false, fmt.Errorf("encoding taint patch: %w", err)
	}
	if _, err := d.Client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return false, fmt.Errorf("lifting %s taint of node %s: %w", taintNotReady, n.Name, err)
	}
	return true, nil
}

// submit creates one pod and returns its node, or "" and the scheduler's message when it
// was unschedulable (it is then deleted).
func (d *driver) submit(ctx context.Context, tr *tracker, p PodSpec) (node, reason string, err error) {
	obj, claim, err := d.podObjects(p)
	if err != nil {
		return "", "", err
	}
	events := tr.watch(obj.Name)
	defer tr.forget(obj.Name)
	if err := d.createClaim(ctx, claim); err != nil {
		return "", "", err
	}
	pods := d.Client.CoreV1().Pods(obj.Namespace)
	if _, err := pods.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		return "", "", fmt.Errorf("creating pod %s: %w", obj.Name, err)
	}
	timeout := d.PodTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	lastMsg := ""
	deleting := false
	for {
		select {
		case ev := <-events:
			switch {
			case ev.deleted && deleting:
				return "", lastMsg, d.deleteClaim(ctx, claim)
			case ev.deleted:
				return "", "", fmt.Errorf("pod %s was deleted by someone else while being scheduled", obj.Name)
			case ev.node != "" && !deleting:
				return ev.node, "", nil
			case ev.unschedulable && !deleting:
				klog.V(2).InfoS("unschedulable", "pod", obj.Name, "message", ev.message)
				deleting = true
				lastMsg = ev.message
				var zero int64
				err := pods.Delete(ctx, obj.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
				if apierrors.IsNotFound(err) {
					return "", lastMsg, d.deleteClaim(ctx, claim)
				}
				if err != nil {
					return "", "", fmt.Errorf("deleting unschedulable pod %s: %w", obj.Name, err)
				}
			case ev.message != "":
				lastMsg = ev.message
			}
		case <-timer.C:
			if deleting {
				return "", "", fmt.Errorf("pod %s: not gone %s after deleting it", obj.Name, timeout)
			}
			return "", "", fmt.Errorf("pod %s: neither bound nor unschedulable after %s (last scheduler message: %q); are kube-scheduler and the extender running?", obj.Name, timeout, lastMsg)
		case <-ctx.Done():
			return "", "", ctx.Err()
		}
	}
}

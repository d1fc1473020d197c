package scale

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/internal/bench/parallel"
)

// Bench holds what every step needs.
type Bench struct {
	Client  kubernetes.Interface
	Objects Objects
	// Workers is the number of concurrent create/delete requests (default 32).
	Workers int
	// APIServerPID is kube-apiserver's process ID: the phases measure its CPU time (0: not
	// measured).
	APIServerPID int
}

func (b *Bench) workers() int {
	if b.Workers <= 0 {
		return 32
	}
	return b.Workers
}

// SetupResult is what Setup did.
type SetupResult struct {
	Nodes   int     `json:"nodes"`
	Seconds float64 `json:"seconds"`
}

// Setup creates the namespace, its default service account (no kube-controller-manager
// runs to create it, and pod admission needs it), nodes NodeName(0..n-1) and BurstNode.
// Existing objects are left as they are. Errors: API failures.
func (b *Bench) Setup(ctx context.Context, n int) (SetupResult, error) {
	start := time.Now()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: b.Objects.Namespace}}
	if _, err := b.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return SetupResult{}, fmt.Errorf("creating namespace %s: %w", ns.Name, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns.Name}}
	if _, err := b.Client.CoreV1().ServiceAccounts(ns.Name).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return SetupResult{}, fmt.Errorf("creating service account default in %s: %w", ns.Name, err)
	}
	klog.InfoS("creating nodes", "count", n+1, "workers", b.workers())
	err := parallel.ForEach(ctx, n+1, b.workers(), func(ctx context.Context, i int) error {
		name, burst := NodeName(i), false
		if i == n {
			name, burst = BurstNode, true
		}
		obj, err := b.Objects.Node(name, burst)
		if err != nil {
			return err
		}
		return b.createNode(ctx, obj)
	})
	if err != nil {
		return SetupResult{}, err
	}
	res := SetupResult{Nodes: n, Seconds: time.Since(start).Seconds()}
	klog.InfoS("nodes created", "count", n+1, "seconds", res.Seconds)
	return res, nil
}

func (b *Bench) createNode(ctx context.Context, obj *corev1.Node) error {
	created, err := b.Client.CoreV1().Nodes().Create(ctx, obj, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		return nil
	case err != nil:
		return fmt.Errorf("creating node %s: %w", obj.Name, err)
	}
	if _, ok := created.Status.Allocatable[b.Objects.Resources.Mem]; !ok || len(created.Status.Conditions) == 0 {
		// Should the API server drop the status on create, write it through the subresource.
		created.Status = obj.Status
		if created, err = b.Client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("setting the status of node %s: %w", obj.Name, err)
		}
	}
	// Admission (TaintNodesByCondition) adds node.kubernetes.io/not-ready on create; the
	// node lifecycle controller, which would lift it, does not run here.
	if len(created.Spec.Taints) != len(obj.Spec.Taints) {
		created.Spec.Taints = obj.Spec.Taints
		if _, err := b.Client.CoreV1().Nodes().Update(ctx, created, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("removing the admission taints of node %s: %w", obj.Name, err)
		}
	}
	return nil
}

package frontend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/metrics"
	"github.com/gpushare/gpushare/pkg/policy"
)

// DefaultBindTimeout bounds a bind's API writes, and separately the read-back that settles
// a failed one.
const DefaultBindTimeout = 30 * time.Second

// BindError is a failed bind with the reason label of gpushare_bind_failures_total
// (metrics.Bind*).
type BindError struct {
	Label string
	Err   error
}

func (e *BindError) Error() string { return e.Err.Error() }

func (e *BindError) Unwrap() error { return e.Err }

// FailBind is a *BindError of label with a formatted error (%w wraps).
func FailBind(label string, format string, args ...any) *BindError {
	return &BindError{Label: label, Err: fmt.Errorf(format, args...)}
}

// Binder writes Bindings for the cards cache.Reserve held.
type Binder struct {
	Cache   *cache.Cache
	Client  kubernetes.Interface
	Reasons Reasons
	// Timeout bounds each API write and, separately, the read-back that settles a failed
	// one (default DefaultBindTimeout).
	Timeout time.Duration
}

func (b *Binder) timeout() time.Duration {
	if b.Timeout > 0 {
		return b.Timeout
	}
	return DefaultBindTimeout
}

// Write binds pod to node with the cards rsv holds (from b.Cache.Reserve for req; a Landed
// rsv needs no Write), then reports the outcome with Cache.Finish: the cards are freed only
// when the pod is definitely not bound by them (see settle). The API writes run on their own
// deadline (Timeout), detached from ctx's cancellation: when a slow API server makes the
// caller give up, a Binding already on its way must finish (or fail) on its own, not be
// cancelled half-way and retried into the same slowness. Errors are *BindError.
func (b *Binder) Write(ctx context.Context, pod *cache.Pod, node string, req gpushare.PodRequest, rsv cache.Reservation) error {
	if rsv.Landed {
		return nil
	}
	outcome := cache.BindUnknown // what a panic below leaves: the cards stay held
	defer func() { b.Cache.Finish(rsv, outcome) }()

	ns, name, uid := pod.GetNamespace(), pod.GetName(), pod.GetUID()
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.timeout())
	defer cancel()
	ann := gpushare.BindAnnotations(rsv.Placement.Allocation, req.TotalUnits(), rsv.CardUnits, rsv.Since)
	if stale := staleAnnotations(pod, ann); stale != nil {
		// Rare: the pod was created carrying bind annotations (e.g. copied from another pod).
		// They must not outlive this bind, and a Binding can only add annotations.
		if err := b.patchAnnotations(wctx, pod, annotationPatch(uid, stale)); err != nil {
			err = fmt.Errorf("removing stale allocation annotations from pod %s/%s: %w", ns, name, err)
			if !rsv.Reused { // no Binding was ever sent with these cards
				outcome = cache.BindRefused
				return &BindError{Label: metrics.BindPatch, Err: fmt.Errorf("%w (reservation released)", err)}
			}
			outcome, err = b.settle(ctx, pod, node, ann, err)
			return err
		}
	}
	if err := b.createBinding(wctx, pod, node, ann); err != nil {
		outcome, err = b.settle(ctx, pod, node, ann,
			fmt.Errorf("binding pod %s/%s to %s: %w", ns, name, node, err))
		return err
	}
	outcome = cache.BindLanded
	return nil
}

// BindPlain binds a pod that requests no gpu-mem: a Binding without annotations.
func (b *Binder) BindPlain(ctx context.Context, pod *cache.Pod, node string) error {
	if err := b.createBinding(ctx, pod, node, nil); err != nil {
		return FailBind(metrics.BindBinding, "binding pod %s/%s to %s: %w", pod.GetNamespace(), pod.GetName(), node, err)
	}
	return nil
}

// ReserveFailed turns a cache.Reserve error into the bind's answer: nil for a pod already
// placed on the requested node (a retry after the informer saw the bind land), else a
// *BindError.
func (b *Binder) ReserveFailed(pod metav1.Object, node string, err error) error {
	ns, name := pod.GetNamespace(), pod.GetName()
	var (
		fit       *policy.FitError
		placed    *cache.AlreadyPlacedError
		elsewhere *cache.HeldElsewhereError
	)
	switch {
	case errors.As(err, &placed) && placed.Node == node:
		return nil
	case errors.As(err, &elsewhere):
		return FailBind(metrics.BindHeldElsewhere, "binding pod %s/%s to %s: %w", ns, name, node, err)
	case errors.Is(err, cache.ErrBindInFlight):
		return FailBind(metrics.BindInFlight, "binding pod %s/%s to %s: %w", ns, name, node, err)
	case errors.Is(err, cache.ErrUnknownNode), errors.Is(err, cache.ErrNoCards), errors.As(err, new(*cache.IsolationError)):
		// What filter answers for this node, whatever the pod: a scheduler that used the
		// filter never asks for it.
		return FailBind(metrics.BindNodeUnfit, "binding pod %s/%s to %s: %s", ns, name, node, b.Reasons.Reject(err).Reason)
	case errors.As(err, &fit):
		err = errors.New(b.Reasons.FitReason(fit))
	}
	return FailBind(metrics.BindNoFit, "choosing cards for pod %s/%s on %s: %w", ns, name, node, err)
}

// settle decides, after a failed write, what became of the pod's Binding, by reading the
// pod from the API server (an informer may lag): bound to node with ann → the bind
// succeeded (nil error); gone, re-created or bound elsewhere → refused; unbound → refused
// only when the failure was definite (the API server refused the call), else unknown and
// the cards stay held. It returns the outcome for cache.Finish and the bind's error.
func (b *Binder) settle(ctx context.Context, pod *cache.Pod, node string, ann map[string]string, callErr error) (cache.BindOutcome, error) {
	// Its own deadline: callErr may be the write's deadline running out.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.timeout())
	defer cancel()
	got, err := b.Client.CoreV1().Pods(pod.GetNamespace()).Get(ctx, pod.GetName(), metav1.GetOptions{})
	refused := func(why string) (cache.BindOutcome, error) {
		return cache.BindRefused, &BindError{Label: metrics.BindBinding, Err: fmt.Errorf("%w (%s; reservation released)", callErr, why)}
	}
	switch {
	case apierrors.IsNotFound(err):
		return refused("pod deleted")
	case err != nil:
		return cache.BindUnknown, &BindError{Label: metrics.BindUnknown, Err: fmt.Errorf(
			"%w; outcome unknown, reading the pod back failed: %v (its cards stay held until the pod is seen bound or the reservation expires)", callErr, err)}
	case got.UID != pod.GetUID():
		return refused("pod re-created with UID " + string(got.UID))
	case got.Spec.NodeName == node && carries(got, ann):
		return cache.BindLanded, nil
	case got.Spec.NodeName != "":
		return refused("pod is bound to node " + got.Spec.NodeName + " without this allocation")
	case definite(callErr):
		return refused("pod not bound")
	}
	return cache.BindUnknown, &BindError{Label: metrics.BindUnknown, Err: fmt.Errorf(
		"%w; outcome unknown, pod not bound yet (its cards stay held until the pod is seen bound or the reservation expires)", callErr)}
}

// carries reports whether the pod has every annotation of ann with the same value.
func carries(pod *corev1.Pod, ann map[string]string) bool {
	for k, v := range ann {
		if got, ok := pod.Annotations[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// definite reports an error the API server answered with a refusal of the request itself
// (bad request, forbidden, not found, conflict, gone, invalid): nothing was written. Timeouts,
// 5xx, throttling and transport errors may hide a write that happened.
func definite(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	switch st.Status().Code {
	case http.StatusBadRequest, http.StatusForbidden, http.StatusNotFound, http.StatusConflict,
		http.StatusGone, http.StatusUnprocessableEntity:
		return true
	}
	return false
}

// staleAnnotations returns a merge-patch value deleting the bind annotation keys the pod
// carries but ann does not set, or nil when there are none.
func staleAnnotations(pod *cache.Pod, ann map[string]string) map[string]*string {
	var del map[string]*string
	for _, k := range pod.BindAnnotationKeys() {
		if _, writing := ann[k]; writing {
			continue
		}
		if del == nil {
			del = map[string]*string{}
		}
		del[k] = nil
	}
	return del
}

// annotationPatch is a JSON merge patch setting ann (nil values delete). The uid makes it
// a precondition: the API server refuses the patch if the pod was re-created meanwhile.
func annotationPatch(uid types.UID, ann any) []byte {
	patch := map[string]any{"metadata": map[string]any{"uid": uid, "annotations": ann}}
	b, _ := json.Marshal(patch) // strings only: cannot fail
	return b
}

func (b *Binder) patchAnnotations(ctx context.Context, pod *cache.Pod, patch []byte) error {
	_, err := b.Client.CoreV1().Pods(pod.GetNamespace()).Patch(ctx, pod.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// createBinding binds the pod and sets ann on it in one write: the API server copies a
// Binding's annotations onto the pod together with spec.nodeName, under the pod UID
// precondition. So the device plugin never sees a bound pod without its cards, and a failed
// Binding leaves nothing to roll back.
func (b *Binder) createBinding(ctx context.Context, pod *cache.Pod, node string, ann map[string]string) error {
	return b.Client.CoreV1().Pods(pod.GetNamespace()).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.GetName(), Namespace: pod.GetNamespace(), UID: pod.GetUID(), Annotations: ann},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}, metav1.CreateOptions{})
}

package binding

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/metrics"
)

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
		return cache.BindRefused, &Error{Label: metrics.BindBinding, Err: fmt.Errorf("%w (%s; reservation released)", callErr, why)}
	}
	switch {
	case apierrors.IsNotFound(err):
		return refused("pod deleted")
	case err != nil:
		return cache.BindUnknown, &Error{Label: metrics.BindUnknown, Err: fmt.Errorf(
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
	return cache.BindUnknown, &Error{Label: metrics.BindUnknown, Err: fmt.Errorf(
		"%w; outcome unknown, pod not bound yet (its cards stay held until the pod is seen bound or the reservation expires)", callErr)}
}

// carries reports whether the pod has every annotation of ann with the same value, but
// ASSIGNED: the node's device plugin sets it to true once it serves the pod, which may come
// before the read-back of a Binding that landed.
func carries(pod *corev1.Pod, ann map[string]string) bool {
	for k, v := range ann {
		if k == gpushare.AnnotationAssigned {
			continue
		}
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

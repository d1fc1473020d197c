package binding

import (
	"errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/metrics"
	"github.com/gpushare/gpushare/pkg/policy"
)

// ReserveFailed turns a cache.Reserve error into the bind's answer: nil for a pod already
// placed on the requested node (a retry after the informer saw the bind land), else a
// *Error.
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
		return Fail(metrics.BindHeldElsewhere, "binding pod %s/%s to %s: %w", ns, name, node, err)
	case errors.Is(err, cache.ErrBindInFlight):
		return Fail(metrics.BindInFlight, "binding pod %s/%s to %s: %w", ns, name, node, err)
	case errors.Is(err, cache.ErrUnknownNode), errors.Is(err, cache.ErrNoCards), errors.As(err, new(*cache.IsolationError)),
		errors.As(err, new(*cache.InventoryError)):
		// What filter answers for this node, whatever the pod: a scheduler that used the
		// filter never asks for it.
		return Fail(metrics.BindNodeUnfit, "binding pod %s/%s to %s: %s", ns, name, node, b.Wording.Reject(err).Reason)
	case errors.As(err, &fit):
		err = errors.New(b.Wording.FitReason(fit))
	case errors.As(err, new(*cache.ChoiceError)):
		err = errors.New(b.Wording.Reject(err).Reason)
	}
	return Fail(metrics.BindNoFit, "choosing cards for pod %s/%s on %s: %w", ns, name, node, err)
}

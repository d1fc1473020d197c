package binding

import (
	"context"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/metrics"
	"github.com/gpushare/gpushare/pkg/policy"
	"github.com/gpushare/gpushare/pkg/reasons"
)

// DefaultBindTimeout bounds a bind's API writes, and separately the read-back that settles
// a failed one.
const DefaultBindTimeout = 30 * time.Second

// Binder binds pods with the cards Cache holds for them.
type Binder struct {
	Cache   *cache.Cache
	Client  kubernetes.Interface
	Wording reasons.Wording
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

// Bind binds pod to node. For a gpu-mem request it holds the cards pol chooses for req
// (cache.Reserve, with pol readied by Cache.ForPod; a retry reuses the cards an earlier bind
// of the pod holds), writes the Binding that carries them (Write) and settles the outcome
// with the ledger; a pod already placed on node is bound. A pod that requests nothing gets a
// Binding without annotations. Waiting for an earlier Binding of the same pod is bounded by
// ctx: the scheduler retries later. Errors are *Error.
func (b *Binder) Bind(ctx context.Context, pod *cache.Pod, node string, req gpushare.PodRequest, pol policy.Policy) error {
	if req.IsZero() {
		if err := b.createBinding(ctx, pod, node, nil); err != nil {
			return Fail(metrics.BindBinding, "binding pod %s/%s to %s: %w", pod.GetNamespace(), pod.GetName(), node, err)
		}
		return nil
	}
	rsv, err := b.Cache.Reserve(ctx, node, pod, req, b.Cache.ForPod(pol))
	if err != nil {
		return b.ReserveFailed(pod, node, err)
	}
	return b.Write(ctx, pod, node, req, rsv)
}

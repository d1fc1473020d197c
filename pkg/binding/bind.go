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
	// Lease, when set, is the leadership this replica's writes must end within (see
	// Write); nil: a single replica, or one whose caller is the leader by other means
	// (kube-scheduler's own leader election, for the framework plugin).
	Lease Lease
}

// Lease is the leader lease a replica's bind writes must fit in (implemented by
// *leader.Elector).
type Lease interface {
	// BeginWrite is called right before the writes: it returns how long they may last and
	// done, to call once they are over, or an error when this replica does not surely hold
	// the lease for any write.
	BeginWrite() (left time.Duration, done func(), err error)
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
		wctx, cancel, err := b.writeContext(ctx)
		if err != nil {
			return Fail(metrics.BindLease, "binding pod %s/%s to %s: %w", pod.GetNamespace(), pod.GetName(), node, err)
		}
		defer cancel()
		if err := b.createBinding(wctx, pod, node, nil); err != nil {
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

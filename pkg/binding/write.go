package binding

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/metrics"
)

// Write binds pod to node with the cards rsv holds (from b.Cache.Reserve for req; a Landed
// rsv needs no Write), then reports the outcome with Cache.Finish: the cards are freed only
// when the pod is definitely not bound by them (see settle). The API writes run on their own
// deadline (Timeout), detached from ctx's cancellation: when a slow API server makes the
// caller give up, a Binding already on its way must finish (or fail) on its own, not be
// cancelled half-way and retried into the same slowness. With a Lease, they must also end
// while this replica surely leads: the deadline is the shorter of Timeout and what
// Lease.BeginWrite leaves, checked right before the first write, and with no time left the
// bind is refused before writing (the scheduler retries, on the next leader). Errors are
// *Error.
func (b *Binder) Write(ctx context.Context, pod *cache.Pod, node string, req gpushare.PodRequest, rsv cache.Reservation) error {
	if rsv.Landed {
		return nil
	}
	outcome := cache.BindUnknown // what a panic below leaves: the cards stay held
	defer func() { b.Cache.Finish(rsv, outcome) }()

	ns, name, uid := pod.GetNamespace(), pod.GetName(), pod.GetUID()
	wctx, cancel, err := b.writeContext(ctx)
	if err != nil {
		if !rsv.Reused { // no Binding was ever sent with these cards
			outcome = cache.BindRefused
		}
		return &Error{Label: metrics.BindLease, Err: fmt.Errorf("binding pod %s/%s to %s: %w (the scheduler retries on the leader)",
			ns, name, node, err)}
	}
	defer cancel()
	ann := gpushare.BindAnnotations(rsv.Placement.Allocation, req.TotalUnits(), rsv.CardUnits, rsv.Unit, rsv.Since)
	if stale := staleAnnotations(pod, ann); stale != nil {
		// Rare: the pod was created carrying bind annotations (e.g. copied from another pod).
		// They must not outlive this bind, and a Binding can only add annotations.
		if err := b.patchAnnotations(wctx, pod, annotationPatch(uid, stale)); err != nil {
			cancel()
			err = fmt.Errorf("removing stale allocation annotations from pod %s/%s: %w", ns, name, err)
			if !rsv.Reused { // no Binding was ever sent with these cards
				outcome = cache.BindRefused
				return &Error{Label: metrics.BindPatch, Err: fmt.Errorf("%w (reservation released)", err)}
			}
			outcome, err = b.settle(ctx, pod, node, ann, err)
			return err
		}
	}
	err = b.createBinding(wctx, pod, node, ann)
	cancel() // the writes are over: settle only reads
	if err != nil {
		outcome, err = b.settle(ctx, pod, node, ann,
			fmt.Errorf("binding pod %s/%s to %s: %w", ns, name, node, err))
		return err
	}
	outcome = cache.BindLanded
	return nil
}

// writeContext is the context of a bind's writes, detached from ctx's cancellation: it ends
// after Timeout or, with a Lease, when this replica may stop holding it, whichever is first.
// Its cancel (idempotent) also tells the Lease the writes are over. Errors: no Lease time is left.
func (b *Binder) writeContext(ctx context.Context) (context.Context, context.CancelFunc, error) {
	d := b.timeout()
	done := func() {}
	if b.Lease != nil {
		left, leaseDone, err := b.Lease.BeginWrite()
		if err != nil {
			return nil, nil, fmt.Errorf("not writing the Binding: %w", err)
		}
		d, done = min(d, left), leaseDone
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
	return wctx, sync.OnceFunc(func() { cancel(); done() }), nil
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

package routes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/metrics"
	"github.com/gpushare/gpushare/pkg/policy"
)

func (s *server) installBind(r *httprouter.Router) {
	r.POST(Prefix+"/bind", s.whenSynced("bind", s.bind))
}

// bindError is a failed bind with its metric label.
type bindError struct {
	label string
	err   error
}

func (e *bindError) Error() string { return e.err.Error() }

func failBind(label string, format string, args ...any) *bindError {
	return &bindError{label: label, err: fmt.Errorf(format, args...)}
}

// bind reserves cards for the pod, then creates a Binding that carries the allocation
// annotations (one API write); if it fails, the reservation is released. Failures are answered with
// HTTP 200 and ExtenderBindingResult.Error, which is how the scheduler expects them.
func (s *server) bind(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	start := time.Now()
	defer func() { s.Metrics.BindDuration.Observe(since(start)) }()

	var args extenderv1.ExtenderBindingArgs
	if !s.decode(w, r, &args) {
		s.Metrics.BindFailed(metrics.BindBadRequest)
		return
	}
	if args.PodName == "" || args.PodNamespace == "" || args.Node == "" {
		s.Metrics.BindFailed(metrics.BindBadRequest)
		writeError(w, http.StatusBadRequest, errors.New("bind request needs podName, podNamespace and node"))
		return
	}
	logger := klog.FromContext(r.Context()).WithValues("pod", klog.KRef(args.PodNamespace, args.PodName), "node", args.Node)
	var res extenderv1.ExtenderBindingResult
	if err := s.bindPod(r.Context(), args); err != nil {
		var be *bindError
		if errors.As(err, &be) {
			s.Metrics.BindFailed(be.label)
		}
		logger.Info("bind failed", "err", err)
		res.Error = err.Error()
	} else {
		logger.V(2).Info("bound")
	}
	writeJSON(w, http.StatusOK, &res)
}

func (s *server) bindPod(ctx context.Context, args extenderv1.ExtenderBindingArgs) error {
	pod, err := s.getPod(ctx, args.PodNamespace, args.PodName)
	if err != nil {
		return failBind(metrics.BindPodLookup, "looking up pod %s/%s: %w", args.PodNamespace, args.PodName, err)
	}
	ns, name, uid := pod.GetNamespace(), pod.GetName(), pod.GetUID()
	if args.PodUID != "" && uid != args.PodUID {
		return failBind(metrics.BindUIDMismatch, "pod %s/%s has UID %s, bind asked for %s (pod was re-created)",
			args.PodNamespace, args.PodName, uid, args.PodUID)
	}
	req, err := pod.Request()
	if err != nil {
		return failBind(metrics.BindInvalid, "pod %s/%s: %w", ns, name, err)
	}
	if req.IsZero() { // not a gpushare pod: bind it plainly
		if err := s.createBinding(ctx, pod, args.Node, nil); err != nil {
			return failBind(metrics.BindBinding, "binding pod %s/%s to %s: %w", ns, name, args.Node, err)
		}
		return nil
	}

	rsv, err := s.Cache.Reserve(args.Node, pod, req, s.Cache.ForPod(s.Policy))
	if err != nil {
		var fit *policy.FitError
		if errors.As(err, &fit) {
			err = errors.New(s.memName + ": " + fit.Error())
		}
		return failBind(metrics.BindNoFit, "choosing cards for pod %s/%s on %s: %w", ns, name, args.Node, err)
	}
	// The API writes run on their own deadline, detached from the scheduler's request: when a
	// slow API server makes the scheduler give up, a Binding already on its way must finish
	// (or fail) on its own, not be cancelled half-way and retried into the same slowness.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.BindTimeout)
	defer cancel()
	ann := gpushare.BindAnnotations(rsv.Placement.Allocation, req.TotalUnits(), rsv.CardUnits, s.Clock.Now())
	if stale := staleAnnotations(pod, ann); stale != nil {
		// Rare: the pod was created carrying bind annotations (e.g. copied from another pod).
		// They must not outlive this bind, and a Binding can only add annotations.
		if err := s.patchAnnotations(ctx, pod, annotationPatch(uid, stale)); err != nil {
			s.Cache.Release(uid)
			return failBind(metrics.BindPatch, "removing stale allocation annotations from pod %s/%s: %w", ns, name, err)
		}
	}
	if err := s.createBinding(ctx, pod, args.Node, ann); err != nil {
		s.Cache.Release(uid)
		return failBind(metrics.BindBinding, "binding pod %s/%s to %s (reservation released): %w",
			ns, name, args.Node, err)
	}
	return nil
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

// getPod reads the pod from the cache's informer, else from the API server (a pod created
// moments ago may not have reached the informer yet), in the slim form either way: bind
// reads no more of a pod than the informer keeps.
func (s *server) getPod(ctx context.Context, ns, name string) (*cache.Pod, error) {
	if pod, ok := s.Cache.Pod(ns, name); ok {
		return pod, nil
	}
	pod, err := s.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return cache.NewPod(pod, s.Resources), nil
}

// annotationPatch is a JSON merge patch setting ann (nil values delete). The uid makes it
// a precondition: the API server refuses the patch if the pod was re-created meanwhile.
func annotationPatch(uid types.UID, ann any) []byte {
	patch := map[string]any{"metadata": map[string]any{"uid": uid, "annotations": ann}}
	b, _ := json.Marshal(patch) // strings only: cannot fail
	return b
}

func (s *server) patchAnnotations(ctx context.Context, pod *cache.Pod, patch []byte) error {
	_, err := s.Client.CoreV1().Pods(pod.GetNamespace()).Patch(ctx, pod.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// createBinding binds the pod and sets ann on it in one write: the API server copies a
// Binding's annotations onto the pod together with spec.nodeName, under the pod UID
// precondition. So the device plugin never sees a bound pod without its cards, and a failed
// Binding leaves nothing to roll back.
func (s *server) createBinding(ctx context.Context, pod *cache.Pod, node string, ann map[string]string) error {
	return s.Client.CoreV1().Pods(pod.GetNamespace()).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.GetName(), Namespace: pod.GetNamespace(), UID: pod.GetUID(), Annotations: ann},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}, metav1.CreateOptions{})
}

package routes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/metrics"
	"github.com/gpushare/gpushare/pkg/policy"
)

func (s *server) installBind(r *httprouter.Router) {
	r.POST(Prefix+"/bind", s.limit("bind", s.whenLeading("bind", s.whenSynced("bind", s.bind))))
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

// bind holds cards for the pod, then creates a Binding that carries the allocation
// annotations (one API write). A failed write is resolved by reading the pod back (see
// settle): the cards are freed only when the pod is definitely not bound by them. Retries of
// the same bind reuse the held cards (see cache.Reserve). Failures are answered with HTTP 200
// and ExtenderBindingResult.Error, which is how the scheduler expects them.
func (s *server) bind(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	start := time.Now()
	defer func() { s.Metrics.BindDuration.Observe(since(start)) }()

	var args extenderv1.ExtenderBindingArgs
	if !s.decode(w, r, &args) {
		s.Metrics.BindFailed(metrics.BindBadRequest)
		return
	}
	if label, err := checkBindArgs(&args); err != nil {
		s.Metrics.BindFailed(label)
		writeError(w, http.StatusBadRequest, err)
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

// checkBindArgs refuses a request that cannot name a pod and node (the bad_request label)
// or names no pod UID (no_uid): kube-scheduler always sends the UID of the pod it placed,
// and without it a bind could hit another pod created under the same name. Names that are
// not valid object names are refused here, before they reach an API call.
func checkBindArgs(args *extenderv1.ExtenderBindingArgs) (label string, err error) {
	switch {
	case args.PodName == "" || args.PodNamespace == "" || args.Node == "":
		return metrics.BindBadRequest, errors.New("bind request needs podName, podNamespace and node")
	case args.PodUID == "":
		return metrics.BindNoUID, errors.New("bind request needs podUID, the UID of the pod the scheduler placed")
	}
	for _, f := range []struct {
		field string
		errs  []string
	}{
		{"podNamespace", validation.ValidateNamespaceName(args.PodNamespace, false)},
		{"podName", validation.NameIsDNSSubdomain(args.PodName, false)},
		{"node", validation.NameIsDNSSubdomain(args.Node, false)},
	} {
		if len(f.errs) > 0 {
			return metrics.BindBadRequest, fmt.Errorf("bind request: %s is not a valid name: %s", f.field, strings.Join(f.errs, "; "))
		}
	}
	return "", nil
}

// bindPod binds the pod args name, after checking that it is one the extender may bind: the
// UID the scheduler placed, a scheduler the extender serves, a gpu-mem request (unless
// BindNonGPUPods), and a node its filter passes (checked by Reserve, under the node lock).
func (s *server) bindPod(ctx context.Context, args extenderv1.ExtenderBindingArgs) error {
	pod, err := s.getPod(ctx, args.PodNamespace, args.PodName)
	if err != nil {
		return err
	}
	ns, name, uid := pod.GetNamespace(), pod.GetName(), pod.GetUID()
	if uid != args.PodUID {
		return failBind(metrics.BindUIDMismatch, "pod %s/%s has UID %s, bind asked for %s (pod was re-created)",
			args.PodNamespace, args.PodName, uid, args.PodUID)
	}
	if sched := schedulerOf(pod); !s.served.Has(sched) {
		return failBind(metrics.BindSchedulerName, "pod %s/%s has schedulerName %q; this extender binds only pods of %s",
			ns, name, sched, strings.Join(sets.List(s.served), ", "))
	}
	req, err := pod.Request()
	if err != nil {
		return failBind(metrics.BindInvalid, "pod %s/%s: %w", ns, name, err)
	}
	if req.IsZero() { // not a gpushare pod: bind it plainly, when allowed to
		if !s.BindNonGPUPods {
			return failBind(metrics.BindNotGPU, "pod %s/%s requests no %s; this extender binds only pods that do "+
				"(a scheduler configuration without managedResources sends it every pod: see --bind-non-gpu-pods)",
				ns, name, s.Resources.Mem)
		}
		if err := s.createBinding(ctx, pod, args.Node, nil); err != nil {
			return failBind(metrics.BindBinding, "binding pod %s/%s to %s: %w", ns, name, args.Node, err)
		}
		return nil
	}

	// Waiting for an earlier Binding of the same pod is bounded by this request: the
	// scheduler retries later.
	rsv, err := s.Cache.Reserve(ctx, args.Node, pod, req, s.Cache.ForPod(s.Policy))
	if err != nil {
		return s.reserveFailed(pod, args.Node, err)
	}
	if rsv.Landed {
		return nil // a retry of a bind whose Binding succeeded
	}
	outcome := cache.BindUnknown // what a panic below leaves: the cards stay held
	defer func() { s.Cache.Finish(rsv, outcome) }()

	// The API writes run on their own deadline, detached from the scheduler's request: when a
	// slow API server makes the scheduler give up, a Binding already on its way must finish
	// (or fail) on its own, not be cancelled half-way and retried into the same slowness.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.BindTimeout)
	defer cancel()
	ann := gpushare.BindAnnotations(rsv.Placement.Allocation, req.TotalUnits(), rsv.CardUnits, rsv.Since)
	if stale := staleAnnotations(pod, ann); stale != nil {
		// Rare: the pod was created carrying bind annotations (e.g. copied from another pod).
		// They must not outlive this bind, and a Binding can only add annotations.
		if err := s.patchAnnotations(wctx, pod, annotationPatch(uid, stale)); err != nil {
			err = fmt.Errorf("removing stale allocation annotations from pod %s/%s: %w", ns, name, err)
			if !rsv.Reused { // no Binding was ever sent with these cards
				outcome = cache.BindRefused
				return &bindError{label: metrics.BindPatch, err: fmt.Errorf("%w (reservation released)", err)}
			}
			outcome, err = s.settle(ctx, pod, args.Node, ann, err)
			return err
		}
	}
	if err := s.createBinding(wctx, pod, args.Node, ann); err != nil {
		outcome, err = s.settle(ctx, pod, args.Node, ann,
			fmt.Errorf("binding pod %s/%s to %s: %w", ns, name, args.Node, err))
		return err
	}
	outcome = cache.BindLanded
	return nil
}

// reserveFailed turns a Reserve error into the bind's answer: nil for a pod already placed
// on the requested node (a retry after the informer saw the bind land).
func (s *server) reserveFailed(pod *cache.Pod, node string, err error) error {
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
		return failBind(metrics.BindHeldElsewhere, "binding pod %s/%s to %s: %w", ns, name, node, err)
	case errors.Is(err, cache.ErrBindInFlight):
		return failBind(metrics.BindInFlight, "binding pod %s/%s to %s: %w", ns, name, node, err)
	case errors.Is(err, cache.ErrUnknownNode), errors.Is(err, cache.ErrNoCards):
		// What filter answers for this node, whatever the pod: a scheduler that used the
		// filter never asks for it.
		return failBind(metrics.BindNodeUnfit, "binding pod %s/%s to %s: %s", ns, name, node, s.reject(err).reason)
	case errors.As(err, &fit):
		err = errors.New(s.memName + ": " + fit.Error())
	}
	return failBind(metrics.BindNoFit, "choosing cards for pod %s/%s on %s: %w", ns, name, node, err)
}

// settle decides, after a failed write, what became of the pod's Binding, by reading the
// pod from the API server (the informer may lag): bound to node with ann → the bind
// succeeded (nil error); gone, re-created or bound elsewhere → refused; unbound → refused
// only when the failure was definite (the API server refused the call), else unknown and
// the cards stay held. It returns the outcome for cache.Finish and the bind's error.
func (s *server) settle(ctx context.Context, pod *cache.Pod, node string, ann map[string]string, callErr error) (cache.BindOutcome, error) {
	// Its own deadline: callErr may be the write's deadline running out.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.BindTimeout)
	defer cancel()
	got, err := s.Client.CoreV1().Pods(pod.GetNamespace()).Get(ctx, pod.GetName(), metav1.GetOptions{})
	refused := func(why string) (cache.BindOutcome, error) {
		return cache.BindRefused, &bindError{label: metrics.BindBinding, err: fmt.Errorf("%w (%s; reservation released)", callErr, why)}
	}
	switch {
	case apierrors.IsNotFound(err):
		return refused("pod deleted")
	case err != nil:
		return cache.BindUnknown, &bindError{label: metrics.BindUnknown, err: fmt.Errorf(
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
	return cache.BindUnknown, &bindError{label: metrics.BindUnknown, err: fmt.Errorf(
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

// schedulerOf is the pod's scheduler name, with the API server's default for none.
func schedulerOf(pod *cache.Pod) string {
	if n := pod.SchedulerName(); n != "" {
		return n
	}
	return DefaultSchedulerName
}

// getPod reads the pod from the cache's informer, else from the API server (a pod created
// moments ago may not have reached the informer yet), in the slim form either way: bind
// reads no more of a pod than the informer keeps. The API reads are rate-limited (podGets):
// a name the informer does not hold is rare from the scheduler and free for anyone else to
// invent, so beyond the rate the bind fails at once, without a read. Errors are *bindError
// (pod_lookup).
func (s *server) getPod(ctx context.Context, ns, name string) (*cache.Pod, error) {
	if pod, ok := s.Cache.Pod(ns, name); ok {
		return pod, nil
	}
	if !s.podGets.Allow() {
		return nil, failBind(metrics.BindPodLookup, "looking up pod %s/%s: not in the extender's pod cache, and reading "+
			"such pods from the API server is over its rate limit (%g/s, burst %d); retry shortly",
			ns, name, s.PodGetQPS, s.PodGetBurst)
	}
	pod, err := s.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, failBind(metrics.BindPodLookup, "looking up pod %s/%s: %w", ns, name, err)
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

package routes

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/binding"
	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/metrics"
	"github.com/gpushare/gpushare/pkg/policy"
)

func (s *server) installBind(r *httprouter.Router) {
	r.POST(Prefix+"/bind", s.limit("bind", s.whenLeading("bind", s.whenSynced("bind", s.bind))))
}

// bind answers the scheduler's bind call: bindPod checks the pod, and binding.Binder.Bind
// holds its cards, writes the Binding that carries them and settles the outcome. Failures are
// answered with HTTP 200 and ExtenderBindingResult.Error, which is how the scheduler expects
// them.
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
		var be *binding.Error
		if errors.As(err, &be) {
			s.Metrics.BindFailed(be.Label)
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
// BindNonGPUPods), and a node its filter passes (checked by Bind's reservation, under the
// node lock).
func (s *server) bindPod(ctx context.Context, args extenderv1.ExtenderBindingArgs) error {
	pod, err := s.getPod(ctx, args.PodNamespace, args.PodName)
	if err != nil {
		return err
	}
	ns, name, uid := pod.GetNamespace(), pod.GetName(), pod.GetUID()
	if uid != args.PodUID {
		return binding.Fail(metrics.BindUIDMismatch, "pod %s/%s has UID %s, bind asked for %s (pod was re-created)",
			args.PodNamespace, args.PodName, uid, args.PodUID)
	}
	if sched := schedulerOf(pod); !s.served.Has(sched) {
		return binding.Fail(metrics.BindSchedulerName, "pod %s/%s has schedulerName %q; this extender binds only pods of %s",
			ns, name, sched, strings.Join(sets.List(s.served), ", "))
	}
	req, err := pod.Request()
	if err != nil {
		return binding.Fail(metrics.BindInvalid, "pod %s/%s: %w", ns, name, err)
	}
	if req.IsZero() && !s.BindNonGPUPods {
		return binding.Fail(metrics.BindNotGPU, "pod %s/%s requests no %s; this extender binds only pods that do "+
			"(a scheduler configuration without managedResources sends it every pod: see --bind-non-gpu-pods)",
			ns, name, s.Resources.Mem)
	}
	return s.binder.Bind(ctx, pod, args.Node, req, policy.ForChoice(s.Policy, req.Choice))
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
// invent, so beyond the rate the bind fails at once, without a read. Errors are
// *binding.Error (pod_lookup).
func (s *server) getPod(ctx context.Context, ns, name string) (*cache.Pod, error) {
	if pod, ok := s.Cache.Pod(ns, name); ok {
		return pod, nil
	}
	if !s.podGets.Allow() {
		return nil, binding.Fail(metrics.BindPodLookup, "looking up pod %s/%s: not in the extender's pod cache, and reading "+
			"such pods from the API server is over its rate limit (%g/s, burst %d); retry shortly",
			ns, name, s.PodGetQPS, s.PodGetBurst)
	}
	pod, err := s.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, binding.Fail(metrics.BindPodLookup, "looking up pod %s/%s: %w", ns, name, err)
	}
	return cache.NewPod(pod, s.Resources), nil
}

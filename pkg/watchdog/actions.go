package watchdog

import (
	"context"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// annotatePod sets the pod annotation key to value as JSON and reports whether that is done:
// true also when the pod is gone or replaced. why says in the log what the pod did ("over
// its GPU memory grant"). A failure is logged; the caller tries again at the next sample.
func (w *Watchdog) annotatePod(ctx context.Context, pod *corev1.Pod, key string, value any, why string) bool {
	v, err := json.Marshal(value)
	if err != nil {
		return false
	}
	// The UID precondition keeps a re-created pod of the same name untouched.
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": pod.UID,
		"annotations": map[string]string{key: string(v)}}})
	if err != nil {
		return false
	}
	if _, err := w.cfg.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return true // the pod is gone or replaced
		}
		klog.ErrorS(err, "Annotating a pod "+why+" failed; will retry", "pod", klog.KObj(pod))
		return false
	}
	return true
}

// evictPod evicts the pod through the Eviction API (PodDisruptionBudgets apply; the UID
// precondition spares a re-created pod of the same name) and reports whether that is done:
// true also when it already was in this sample (evicted), or the pod is gone or replaced.
// why and keysAndValues go to the log. A refusal or failure is logged; the caller tries
// again at the next sample.
func (w *Watchdog) evictPod(ctx context.Context, pod *corev1.Pod, evicted map[types.UID]bool, why string, keysAndValues ...any) bool {
	if evicted[pod.UID] {
		return true
	}
	uid := pod.UID
	err := w.cfg.Client.CoreV1().Pods(pod.Namespace).EvictV1(ctx, &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}},
	})
	kv := append([]any{"pod", klog.KObj(pod)}, keysAndValues...)
	switch {
	case err == nil:
		evicted[uid] = true
		klog.InfoS("Evicted a pod "+why, kv...)
		return true
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return true
	case apierrors.IsTooManyRequests(err):
		klog.InfoS("Eviction of a pod "+why+" refused (a PodDisruptionBudget allows no disruption now); will retry", append(kv, "err", err)...)
	default:
		klog.ErrorS(err, "Evicting a pod "+why+" failed; will retry", kv...)
	}
	return false
}

package scale

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// podWatch follows the pods of one set: when each was first seen bound or unschedulable.
type podWatch struct {
	mu      sync.Mutex
	bound   map[string]time.Time // first seen with spec.nodeName
	unsched map[string]time.Time // PodScheduled=False/Unschedulable and not bound (yet)
	present map[string]bool
	lister  corelisters.PodLister
}

// counts is a snapshot of a podWatch.
type counts struct {
	Bound, Unschedulable, Present int
	LastBound                     time.Time
	LastDecided                   time.Time
}

// watchSet starts an informer on the set's pods and waits for its initial list. The
// informer stops with ctx.
func (b *Bench) watchSet(ctx context.Context, set string) (*podWatch, error) {
	w := &podWatch{bound: map[string]time.Time{}, unsched: map[string]time.Time{}, present: map[string]bool{}}
	selector := labels.Set{LabelSet: set}.String()
	factory := informers.NewSharedInformerFactoryWithOptions(b.Client, 0,
		informers.WithNamespace(b.Objects.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	inf := factory.Core().V1().Pods().Informer()
	w.lister = factory.Core().V1().Pods().Lister()
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    w.onPod,
		UpdateFunc: func(_, obj any) { w.onPod(obj) },
		DeleteFunc: w.onDelete,
	}); err != nil {
		return nil, fmt.Errorf("watching pods of set %s: %w", set, err)
	}
	factory.Start(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("waiting for the pod informer of set %s: %w", set, ctx.Err())
	}
	return w, nil
}

func (w *podWatch) onPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.present[pod.Name] = true
	if pod.Spec.NodeName != "" {
		if _, seen := w.bound[pod.Name]; !seen {
			w.bound[pod.Name] = now
		}
		delete(w.unsched, pod.Name)
		return
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			if _, seen := w.unsched[pod.Name]; !seen {
				w.unsched[pod.Name] = now
			}
		}
	}
}

func (w *podWatch) onDelete(obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	delete(w.present, pod.Name)
	w.mu.Unlock()
}

func (w *podWatch) snapshot() counts {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := counts{Bound: len(w.bound), Unschedulable: len(w.unsched), Present: len(w.present)}
	for _, t := range w.bound {
		if t.After(c.LastBound) {
			c.LastBound = t
		}
	}
	c.LastDecided = c.LastBound
	for _, t := range w.unsched {
		if t.After(c.LastDecided) {
			c.LastDecided = t
		}
	}
	return c
}

// waitFor polls the watch until done holds, logging progress every 5 s. Errors: timeout
// (with the last counts) or ctx cancelled.
func (w *podWatch) waitFor(ctx context.Context, what string, timeout time.Duration, done func(counts) bool) (counts, error) {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	lastLog := time.Now()
	for {
		c := w.snapshot()
		if done(c) {
			return c, nil
		}
		if time.Now().After(deadline) {
			return c, fmt.Errorf("timed out after %s waiting for %s: %d present, %d bound, %d unschedulable",
				timeout, what, c.Present, c.Bound, c.Unschedulable)
		}
		if time.Since(lastLog) >= 5*time.Second {
			klog.InfoS("waiting", "for", what, "present", c.Present, "bound", c.Bound, "unschedulable", c.Unschedulable)
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return c, ctx.Err()
		case <-tick.C:
		}
	}
}

// pods lists the set's pods from the informer.
func (w *podWatch) pods() ([]*corev1.Pod, error) {
	out, err := w.lister.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing pods from the informer: %w", err)
	}
	return out, nil
}

package replay

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// podEvent is what the driver waits for after creating a pod.
type podEvent struct {
	node          string // set when the pod is bound
	unschedulable bool   // PodScheduled=False, reason Unschedulable
	message       string // the PodScheduled condition's message
	deleted       bool
}

// tracker turns pod informer events into podEvents for the pods the driver waits on.
// Events for other pods are dropped.
type tracker struct {
	mu      sync.Mutex
	waiting map[string]chan podEvent
}

func newTracker() *tracker { return &tracker{waiting: map[string]chan podEvent{}} }

// watch registers name before the pod is created, so no event is missed.
func (t *tracker) watch(name string) <-chan podEvent {
	ch := make(chan podEvent, 8)
	t.mu.Lock()
	t.waiting[name] = ch
	t.mu.Unlock()
	return ch
}

func (t *tracker) forget(name string) {
	t.mu.Lock()
	delete(t.waiting, name)
	t.mu.Unlock()
}

func (t *tracker) send(name string, ev podEvent) {
	t.mu.Lock()
	ch := t.waiting[name]
	t.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case ch <- ev:
	default: // the waiter has enough to decide; later events say the same
	}
}

// handler is the informer's event handler.
func (t *tracker) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.onPod(obj) },
		UpdateFunc: func(_, obj any) { t.onPod(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				t.send(pod.Name, podEvent{deleted: true})
			}
		},
	}
}

func (t *tracker) onPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if pod.Spec.NodeName != "" {
		t.send(pod.Name, podEvent{node: pod.Spec.NodeName})
		return
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			t.send(pod.Name, podEvent{unschedulable: c.Reason == corev1.PodReasonUnschedulable, message: c.Message})
		}
	}
}

package inspect

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// Test builders: nodes and pods as share-plugin and the extender leave them.

type nodeB struct{ n corev1.Node }

func makeNode(name, ip string) *nodeB {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}, Annotations: map[string]string{}}}
	if ip != "" {
		n.Status.Addresses = []corev1.NodeAddress{
			{Type: corev1.NodeHostName, Address: name},
			{Type: corev1.NodeInternalIP, Address: ip},
		}
	}
	return &nodeB{n}
}

// Sharing sets the cgpu=true label.
func (b *nodeB) Sharing() *nodeB {
	b.n.Labels[gpushare.NodeLabelKey] = gpushare.NodeLabelValue
	return b
}

// Inventory sets share-plugin's annotation from devices in unit u.
func (b *nodeB) Inventory(t *testing.T, u gpushare.Unit, devs ...gpushare.Device) *nodeB {
	t.Helper()
	s, err := gpushare.Inventory{Unit: u, Devices: devs}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	b.n.Annotations[gpushare.AnnotationNodeInventory] = s
	return b
}

// Allocatable sets gpu-mem and gpu-count as the old device plugin did.
func (b *nodeB) Allocatable(mem, count int64) *nodeB {
	b.n.Status.Allocatable = corev1.ResourceList{
		gpushare.DefaultMemResource:   *resource.NewQuantity(mem, resource.DecimalSI),
		gpushare.DefaultCountResource: *resource.NewQuantity(count, resource.DecimalSI),
	}
	b.n.Status.Capacity = b.n.Status.Allocatable.DeepCopy()
	return b
}

func (b *nodeB) Annotate(k, v string) *nodeB { b.n.Annotations[k] = v; return b }
func (b *nodeB) Label(k, v string) *nodeB    { b.n.Labels[k] = v; return b }

// Usage sets share-plugin's usage annotation.
func (b *nodeB) Usage(t *testing.T, u gpushare.Usage) *nodeB {
	t.Helper()
	s, err := u.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b.Annotate(gpushare.AnnotationNodeUsage, s)
}

func (b *nodeB) Obj() *corev1.Node { n := b.n.DeepCopy(); return n }

func t4(index int) gpushare.Device {
	return gpushare.Device{Index: index, UUID: "GPU-t4-" + string(rune('a'+index)), Model: "Tesla T4", Units: 14, MemoryMiB: 15079, Healthy: true}
}

func a100(index int) gpushare.Device {
	return gpushare.Device{Index: index, UUID: "GPU-a100-" + string(rune('a'+index)), Model: "NVIDIA A100-SXM4-80GB", Units: 80, MemoryMiB: 81920, Healthy: true}
}

func card(index int, units int64, healthy bool) gpushare.Device {
	return gpushare.Device{Index: index, UUID: "GPU-" + string(rune('a'+index)), Model: "Tesla V100", Units: units, Healthy: healthy}
}

type podB struct{ p corev1.Pod }

func makePod(ns, name string) *podB {
	return &podB{corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name), Annotations: map[string]string{}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}}
}

func limits(mem, count int64) corev1.ResourceRequirements {
	l := corev1.ResourceList{}
	if mem > 0 {
		l[gpushare.DefaultMemResource] = *resource.NewQuantity(mem, resource.DecimalSI)
	}
	if count > 0 {
		l[gpushare.DefaultCountResource] = *resource.NewQuantity(count, resource.DecimalSI)
	}
	return corev1.ResourceRequirements{Limits: l}
}

// GPU adds an app container with mem gpu-mem units on count cards (count 0: no gpu-count).
func (b *podB) GPU(mem, count int64) *podB {
	b.p.Spec.Containers = append(b.p.Spec.Containers, corev1.Container{
		Name: "c" + string(rune('0'+len(b.p.Spec.Containers))), Resources: limits(mem, count)})
	return b
}

// InitGPU adds a regular init container with mem gpu-mem units.
func (b *podB) InitGPU(mem int64) *podB {
	b.p.Spec.InitContainers = append(b.p.Spec.InitContainers, corev1.Container{
		Name: "init" + string(rune('0'+len(b.p.Spec.InitContainers))), Resources: limits(mem, 0)})
	return b
}

func (b *podB) Node(n string) *podB           { b.p.Spec.NodeName = n; return b }
func (b *podB) Phase(p corev1.PodPhase) *podB { b.p.Status.Phase = p; return b }
func (b *podB) Annotate(k, v string) *podB    { b.p.Annotations[k] = v; return b }
func (b *podB) Alloc(json string) *podB       { return b.Annotate(gpushare.AnnotationAllocation, json) }
func (b *podB) InitAlloc(json string) *podB {
	return b.Annotate(gpushare.AnnotationInitAllocation, json)
}
func (b *podB) Index(idx string) *podB { return b.Annotate(gpushare.AnnotationIndex, idx) }
func (b *podB) Condition(c corev1.PodCondition) *podB {
	b.p.Status.Conditions = append(b.p.Status.Conditions, c)
	return b
}
func (b *podB) Obj() *corev1.Pod { return b.p.DeepCopy() }

// failedScheduling is a FailedScheduling event for pod seen at minute m after a fixed epoch,
// written the way kube-scheduler's events.k8s.io recorder does (EventTime/Series, no
// LastTimestamp) when series is true.
func failedScheduling(pod *corev1.Pod, name string, m int, msg string, series bool) *corev1.Event {
	at := time.Date(2026, 11, 23, 6, m, 0, 0, time.UTC)
	e := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: name},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name,
			UID: pod.UID},
		Reason:  reasonFailedScheduling,
		Message: msg,
		Type:    corev1.EventTypeWarning,
	}
	if series {
		e.EventTime = metav1.NewMicroTime(at.Add(-time.Hour))
		e.Series = &corev1.EventSeries{Count: 3, LastObservedTime: metav1.NewMicroTime(at)}
	} else {
		e.LastTimestamp = metav1.NewTime(at)
	}
	return e
}

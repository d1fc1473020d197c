package replay

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

// fakeKwok marks every new node Ready and, like the API server's TaintNodesByCondition
// admission, leaves the not-ready taint for the driver to lift.
func fakeKwok(ctx context.Context, t *testing.T, c kubernetes.Interface) {
	w, err := c.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Error(err)
		return
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok || ev.Type != watch.Added {
				continue
			}
			n = n.DeepCopy()
			n.Spec.Taints = []corev1.Taint{{Key: taintNotReady, Effect: corev1.TaintEffectNoSchedule}}
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
			if _, err := c.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil && ctx.Err() == nil {
				t.Errorf("fake kwok: %v", err)
			}
		}
	}()
}

// fakeScheduler binds each new pod to the node named by place(pod), or marks it
// Unschedulable when place returns "".
func fakeScheduler(ctx context.Context, t *testing.T, c kubernetes.Interface, place func(*corev1.Pod) string) {
	w, err := c.CoreV1().Pods("replay").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Error(err)
		return
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type != watch.Added {
				continue
			}
			p = p.DeepCopy()
			if node := place(p); node != "" {
				p.Spec.NodeName = node
				_, err = c.CoreV1().Pods("replay").Update(ctx, p, metav1.UpdateOptions{})
			} else {
				p.Status.Conditions = []corev1.PodCondition{{
					Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
					Reason: corev1.PodReasonUnschedulable, Message: "0/2 nodes are available",
				}}
				_, err = c.CoreV1().Pods("replay").UpdateStatus(ctx, p, metav1.UpdateOptions{})
			}
			if err != nil && ctx.Err() == nil {
				t.Errorf("fake scheduler: %v", err)
			}
		}
	}()
}

func testDriver(t *testing.T, c kubernetes.Interface) *driver {
	nodes := []NodeSpec{{Name: "n1", MilliCPU: 8000, MemoryMiB: 1024, GPUs: 2, Model: "T4"}}
	d := &driver{Client: c, Objects: newObjects(t, UnitMilli, nodes...), PodTimeout: 5 * time.Second, NodeReadyTimeout: 5 * time.Second}
	return d
}

func TestDriverRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := fake.NewClientset()
	fakeKwok(ctx, t, c)
	fakeScheduler(ctx, t, c, func(p *corev1.Pod) string {
		if strings.HasPrefix(p.Name, "big") {
			return ""
		}
		if _, gpu := p.Spec.Containers[0].Resources.Limits["aliyun.com/gpu-mem"]; !gpu {
			return "n2"
		}
		return "n1"
	})
	nodes := []NodeSpec{
		{Name: "n1", MilliCPU: 8000, MemoryMiB: 1024, GPUs: 2, Model: "T4"},
		{Name: "n2", MilliCPU: 8000, MemoryMiB: 1024, GPUs: 2, Model: "T4"},
	}
	pods := []PodSpec{
		gpuPod("a", 1, 500),
		gpuPod("big-0", 2, 1000),
		{Name: "cpu", MilliCPU: 100},
		gpuPod("b", 1, 1000),
	}
	d := testDriver(t, c)
	rec := newRecorder(totalGPUMilli(nodes))
	res, err := d.Run(ctx, nodes, pods, rec)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range rec.Steps() {
		got = append(got, s.Pod+"@"+s.Node)
	}
	if diff := cmp.Diff([]string{"a@n1", "big-0@", "cpu@n2", "b@n1"}, got); diff != "" {
		t.Errorf("placements (-want,+got):\n%s", diff)
	}
	if r := rec.Steps()[1].Reason; r != "0/2 nodes are available" {
		t.Errorf("failure reason %q, want the scheduler's message", r)
	}
	// arrived 500+2000+1000 = 3500 of 4000; allocated 1500.
	last := rec.Steps()[len(rec.Steps())-1]
	if last.ArrivedMilli != 3500 || last.AllocatedMilli != 1500 || last.Failed != 1 {
		t.Errorf("last step = %+v", last)
	}
	if len(res.E2E) != 4 || res.Wall <= 0 {
		t.Errorf("result = %+v", res)
	}
	// The unschedulable pod is gone, the others stay.
	if _, err := c.CoreV1().Pods("replay").Get(ctx, "big-0", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("unschedulable pod still there: %v", err)
	}
	if _, err := c.CoreV1().Pods("replay").Get(ctx, "a", metav1.GetOptions{}); err != nil {
		t.Errorf("bound pod a: %v", err)
	}
	// The not-ready taint was lifted and the nodes carry their GPUs.
	for _, name := range []string{"n1", "n2"} {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(n.Spec.Taints) != 0 {
			t.Errorf("node %s taints %v", name, n.Spec.Taints)
		}
		if q := n.Status.Allocatable["aliyun.com/gpu-mem"]; q.Value() != 2000 {
			t.Errorf("node %s gpu-mem %s", name, q.String())
		}
	}
	if _, err := c.CoreV1().ServiceAccounts("replay").Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Errorf("default service account: %v", err)
	}
}

func TestDriverErrors(t *testing.T) {
	nodes := []NodeSpec{{Name: "n1", MilliCPU: 8000, MemoryMiB: 1024, GPUs: 2, Model: "T4"}}
	t.Run("node exists", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
		_, err := testDriver(t, c).Run(ctx, nodes, nil, newRecorder(2000))
		if err == nil || !strings.Contains(err.Error(), "node n1 already exists") {
			t.Errorf("error = %v", err)
		}
	})
	t.Run("no kwok: nodes never ready", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d := testDriver(t, fake.NewClientset())
		d.NodeReadyTimeout = 300 * time.Millisecond
		_, err := d.Run(ctx, nodes, nil, newRecorder(2000))
		if err == nil || !strings.Contains(err.Error(), "only 0 of 1 nodes are ready; e.g. n1: no Ready condition (is kwok running?)") {
			t.Errorf("error = %v", err)
		}
	})
	t.Run("no scheduler: pod timeout names the pod", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c := fake.NewClientset()
		fakeKwok(ctx, t, c)
		d := testDriver(t, c)
		d.PodTimeout = 300 * time.Millisecond
		rec := newRecorder(2000)
		_, err := d.Run(ctx, nodes, []PodSpec{gpuPod("lonely", 1, 100)}, rec)
		if err == nil || !strings.Contains(err.Error(), "pod lonely: neither bound nor unschedulable") {
			t.Errorf("error = %v", err)
		}
		if len(rec.Steps()) != 0 {
			t.Errorf("recorded %d steps for a pod without outcome", len(rec.Steps()))
		}
	})
}

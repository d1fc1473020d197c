package routes_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/routes"
)

// deadlineClient records the deadline of each Binding write's context.
type deadlineClient struct {
	kubernetes.Interface
	deadlines *[]time.Time // zero: none
}

func (c deadlineClient) CoreV1() typedcorev1.CoreV1Interface {
	return deadlineCore{c.Interface.CoreV1(), c.deadlines}
}

type deadlineCore struct {
	typedcorev1.CoreV1Interface
	deadlines *[]time.Time
}

func (c deadlineCore) Pods(ns string) typedcorev1.PodInterface {
	return deadlinePods{c.CoreV1Interface.Pods(ns), c.deadlines}
}

type deadlinePods struct {
	typedcorev1.PodInterface
	deadlines *[]time.Time
}

func (p deadlinePods) Bind(ctx context.Context, b *corev1.Binding, opts metav1.CreateOptions) error {
	d, _ := ctx.Deadline()
	*p.deadlines = append(*p.deadlines, d)
	return p.PodInterface.Bind(ctx, b, opts)
}

// A bind asks the lease right before its Binding: one whose leadership was lost after the
// request was let in does not write, one whose lease ends before the bind timeout gets a
// write deadline no later than the lease leaves, and the lease learns when the write is over.
func TestBindWithinLease(t *testing.T) {
	tests := []struct {
		name      string
		loseAfter int32         // Leading checks answered true (0: all)
		left      time.Duration // BeginWrite's answer (0: a full lease; < 0: too little)
		wantErr   string        // "": bound
		wantLeft  time.Duration // the write's deadline at most this after the request
	}{
		{name: "lease held throughout", wantLeft: 15 * time.Second},
		{name: "lease shorter than the bind timeout", left: 3 * time.Second, wantLeft: 3 * time.Second},
		{name: "lost between the request and the write", loseAfter: 1, wantErr: "not writing the Binding: not the leader"},
		{name: "lease ends too soon for a write", left: -1, wantErr: "not writing the Binding: the lease ends too soon"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lead := &leadership{left: tc.left}
			lead.leading.Store(true)
			lead.loseAfter.Store(tc.loseAfter)
			var deadlines []time.Time
			f := newFixtureConfig(t, func(c *routes.Config) {
				c.Leadership = lead
				c.Client = deadlineClient{c.Client, &deadlines}
			}, ct.Node("n1", 16), ct.Pod("p", 4))
			ct.Eventually(t, "cache ready", f.Cache.Ready)

			before := time.Now()
			res := f.bind(t, extenderv1.ExtenderBindingArgs{PodName: "p", PodNamespace: "default", PodUID: "uid-p", Node: "n1"})
			after := time.Now()
			if lead.inflight.Load() != 0 {
				t.Errorf("%d writes not reported over to the lease", lead.inflight.Load())
			}
			node := f.pod(t, "p").Spec.NodeName
			if tc.wantErr != "" {
				if !strings.Contains(res.Error, tc.wantErr) || node != "" || len(deadlines) != 0 {
					t.Fatalf("bind: error %q, pod on %q, %d Binding writes; want %q, unbound, none", res.Error, node, len(deadlines), tc.wantErr)
				}
				if got := f.counter(t, "gpushare_bind_failures_total", "lease"); got != 1 {
					t.Errorf("gpushare_bind_failures_total{reason=lease} = %v, want 1", got)
				}
				if used := f.Cache.Inspect()[0].Cards[0].Used; used != 0 {
					t.Errorf("card 0 holds %d units after the refused bind, want 0 (reservation released)", used)
				}
				return
			}
			if res.Error != "" || node != "n1" || len(deadlines) != 1 {
				t.Fatalf("bind: error %q, pod on %q, %d Binding writes; want bound to n1 by one write", res.Error, node, len(deadlines))
			}
			if d := deadlines[0]; d.Before(before.Add(tc.wantLeft)) || d.After(after.Add(tc.wantLeft)) {
				t.Errorf("Binding write deadline %s after the request, want %s", d.Sub(before), tc.wantLeft)
			}
		})
	}
}

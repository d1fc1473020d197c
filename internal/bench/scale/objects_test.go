package scale

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/internal/bench/objects"
	"github.com/gpushare/gpushare/pkg/gpushare"
)

func TestPodSet(t *testing.T) {
	want := []PodShape{
		{1, 1}, {2, 1}, {3, 1}, {4, 1}, {10, 2}, {6, 1}, {7, 1}, {8, 1}, {1, 1}, {4, 2},
	}
	if diff := cmp.Diff(want, podSet(10)); diff != "" {
		t.Errorf("PodSet(10) (-want,+got):\n%s", diff)
	}
	multi := 0
	for _, s := range podSet(2000) {
		if s.Cards > 1 {
			multi++
		}
	}
	if multi != 400 {
		t.Errorf("multi-card pods in 2000 = %d, want 400", multi)
	}
}

func TestPodRequest(t *testing.T) {
	o := DefaultObjects()
	tests := []struct {
		shape     PodShape
		wantUnits int64
		wantCards int
	}{
		{PodShape{Units: 5, Cards: 1}, 5, 1},
		{PodShape{Units: 12, Cards: 2}, 12, 2},
	}
	for _, tc := range tests {
		p := o.Pod("plain", 3, tc.shape)
		if p.Name != "plain-00003" || p.Labels[LabelSet] != "plain" || p.Namespace != DefaultNamespace {
			t.Errorf("pod identity %s/%s labels %v", p.Namespace, p.Name, p.Labels)
		}
		req, err := o.Resources.PodRequest(p)
		if err != nil {
			t.Fatalf("PodRequest(%+v): %v", tc.shape, err)
		}
		if got := req.TotalUnits(); got != tc.wantUnits {
			t.Errorf("%+v: total units %d, want %d", tc.shape, got, tc.wantUnits)
		}
		if got := req.MaxCards(); got != tc.wantCards {
			t.Errorf("%+v: cards %d, want %d", tc.shape, got, tc.wantCards)
		}
	}
}

func TestNode(t *testing.T) {
	o := DefaultObjects()
	for _, burst := range []bool{false, true} {
		n, err := o.Node("n1", burst)
		if err != nil {
			t.Fatal(err)
		}
		inv, src, err := o.Resources.NodeInventory(n)
		if err != nil || src != gpushare.FromAnnotation {
			t.Fatalf("NodeInventory: %v (source %s)", err, src)
		}
		if len(inv.Devices) != 8 || inv.TotalUnits() != 128 {
			t.Errorf("inventory: %d cards, %d units; want 8, 128", len(inv.Devices), inv.TotalUnits())
		}
		mem := n.Status.Allocatable[o.Resources.Mem]
		if mem.Value() != 128 {
			t.Errorf("allocatable gpu-mem %s, want 128", mem.String())
		}
		if n.Labels[gpushare.NodeLabelKey] != gpushare.NodeLabelValue || n.Labels[objects.LabelHostname] != "n1" {
			t.Errorf("labels %v", n.Labels)
		}
		if len(n.Status.Conditions) != 1 || n.Status.Conditions[0].Type != corev1.NodeReady || n.Status.Conditions[0].Status != corev1.ConditionTrue {
			t.Errorf("conditions %+v, want Ready=True", n.Status.Conditions)
		}
		if got := len(n.Spec.Taints) == 1; got != burst {
			t.Errorf("burst=%v: taints %v", burst, n.Spec.Taints)
		}
	}
}

// TestPodSchedulerName: the plugin phase's pods name gpushare-scheduler; the other phases'
// leave it to the default scheduler.
func TestPodSchedulerName(t *testing.T) {
	for _, want := range []string{"", "gpushare-scheduler"} {
		o := DefaultObjects()
		o.SchedulerName = want
		for i, s := range podSet(5) {
			if got := o.Pod("plugin", i, s).Spec.SchedulerName; got != want {
				t.Errorf("pod %d: schedulerName %q, want %q", i, got, want)
			}
		}
	}
}

func TestBurstPodTolerates(t *testing.T) {
	o := DefaultObjects()
	p := o.BurstPod(7, 6)
	n, err := o.Node(BurstNode, true)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Spec.Tolerations[0].ToleratesTaint(klog.Background(), &n.Spec.Taints[0], false) {
		t.Errorf("burst pod does not tolerate the burst node's taint")
	}
	if p.Spec.NodeSelector[objects.LabelHostname] != BurstNode {
		t.Errorf("nodeSelector %v, want hostname %s", p.Spec.NodeSelector, BurstNode)
	}
}

func TestPlacedPod(t *testing.T) {
	o := DefaultObjects()
	p := o.PlacedPod(3, "scale-node-00001", 5, 8, time.Unix(100, 0))
	if p.Spec.NodeName != "scale-node-00001" {
		t.Errorf("nodeName %q", p.Spec.NodeName)
	}
	a, ok, err := o.Resources.ReadAllocation(p)
	if err != nil || !ok {
		t.Fatalf("ReadAllocation: ok=%v err=%v", ok, err)
	}
	if diff := cmp.Diff(gpushare.CardUnits{5: 8}, a.CardUsage(p)); diff != "" {
		t.Errorf("card usage (-want,+got):\n%s", diff)
	}
}

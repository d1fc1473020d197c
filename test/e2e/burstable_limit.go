//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/nodecards"
)

// CaseBurstableLimit: the real node labelled gpushare.io/isolation=limit, with two simulated
// T4s and the cdi-allocation strategy. A pod requesting 2 units whose annotation
// gpushare.io/gpu-mem-limit gives its container a limit of 6 runs; gpushare-limit-hook
// recorded, for its container's cgroup and for its pod's, the grant (2 × the unit) as soft
// limit and the limit (6 × the unit) as hard limit; kubectl inspect gpushare -d shows the
// limit. Relabelled none, the node refuses a second such pod: it stays Pending with a
// FailedScheduling event saying only limit nodes enforce it.
func CaseBurstableLimit(t *testing.T, e *Env) {
	requireRealNode(t, e)
	requireBinary(t, e, "extender", "share-plugin", "gpushare-limit-hook", "kubectl-inspect-gpushare")
	ctx := testContext(t, 5*time.Minute)

	labelNode(ctx, t, e, e.RealNode, string(gpushare.IsolationLimit))
	inv := restartSharePlugin(ctx, t, e, "t4:2", "GPUSHARE_DEVICE_LIST_STRATEGY=cdi-allocation")
	t.Cleanup(func() { labelNode(context.Background(), t, e, e.RealNode, "") })
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := e.Client.CoreV1().Nodes().Get(ctx, e.RealNode, metav1.GetOptions{})
		return err == nil && n.Labels[gpushare.LabelIsolationEnforced] == string(gpushare.IsolationLimit), nil
	})
	if err != nil {
		t.Fatalf("node %s never labelled %s=%s", e.RealNode, gpushare.LabelIsolationEnforced, gpushare.IsolationLimit)
	}

	ns := newNamespace(t, e)
	p := gpuPod(ns, "burst", e.RealNode, ctr{units: 2})
	p.Annotations = map[string]string{gpushare.AnnotationMemLimit: "c0=6"}
	createPod(t, e, p)
	p = waitPod(t, e, ns, "burst", 2*time.Minute, "Running", isRunning)
	dev := onlyCard(t, p, inv)
	if len(p.Status.ContainerStatuses) != 1 {
		t.Fatalf("container statuses %+v", p.Status.ContainerStatuses)
	}
	_, id, _ := strings.Cut(p.Status.ContainerStatuses[0].ContainerID, "://")
	cardDir := nodecards.SimulatedCardDir(filepath.Join(e.cfg.state, "cdi"))
	soft, hard := uint64(2*inv.Unit.MiB)<<20, uint64(6*inv.Unit.MiB)<<20
	if r, ok := hookRecord(t, cardDir, dev.UUID, id); ok && (r.SoftLimitBytes != soft || r.HardLimitBytes != hard) {
		t.Errorf("container's record: soft %d, hard %d bytes; want the grant %d and the limit %d", r.SoftLimitBytes, r.HardLimitBytes, soft, hard)
	}
	if r, ok := podHookRecord(t, cardDir, dev.UUID, string(p.UID)); ok && (r.SoftLimitBytes != soft || r.HardLimitBytes != hard) {
		t.Errorf("pod's record: soft %d, hard %d bytes; want %d and %d", r.SoftLimitBytes, r.HardLimitBytes, soft, hard)
	}
	if out := kubectlPlugin(t, e, "inspect", "gpushare", "-d", e.RealNode); !strings.Contains(out, "(limit 6)") || !strings.Contains(out, "Limits :") {
		t.Errorf("kubectl inspect gpushare -d does not show the pod's limit:\n%s", out)
	}

	labelNode(ctx, t, e, e.RealNode, string(gpushare.IsolationNone))
	again := gpuPod(ns, "burst-none", e.RealNode, ctr{units: 2})
	again.Annotations = map[string]string{gpushare.AnnotationMemLimit: "c0=6"}
	createPod(t, e, again)
	waitFailedScheduling(t, e, ns, "burst-none", "which only nodes labelled gpushare.io/isolation=limit enforce")
}

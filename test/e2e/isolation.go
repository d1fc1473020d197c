//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// CaseMPSIsolation: the real node labelled gpushare.io/isolation=mps, with two simulated T4s
// and gpushare-mps over a stand-in control daemon. A one-card container gets its MPS memory
// limit (its grant) and the pipe folder of its grant's daemon; a container asking for two
// cards is kept off the node by the scheduler side with the isolation reason; inspect shows
// the mode. This checks the label's path through the extender and share-plugin
// (TestE2E/MPSDaemons checks the daemons).
func CaseMPSIsolation(t *testing.T, e *Env) {
	requireRealNode(t, e)
	requireBinary(t, e, "extender", "share-plugin", "kubectl-inspect-gpushare")
	ctx := testContext(t, 5*time.Minute)
	root, _ := startMPSLauncher(t, e)
	inv := restartSharePlugin(ctx, t, e, "t4:2", "GPUSHARE_MPS_ROOT="+root)
	labelNode(ctx, t, e, e.RealNode, string(gpushare.IsolationMPS))
	t.Cleanup(func() { labelNode(context.Background(), t, e, e.RealNode, "") })

	ns := newNamespace(t, e)
	createPod(t, e, gpuPod(ns, "one", e.RealNode, ctr{units: 4}))
	p := waitPod(t, e, ns, "one", 2*time.Minute, "Running", isRunning)
	dev := onlyCard(t, p, inv)
	logs := podLogs(t, e, ns, "one")
	for _, want := range []string{
		gpushare.EnvMPSPinnedMemLimit + "=" + gpushare.MPSMemLimit(4096),
		gpushare.EnvMPSPipeDirectory + "=" + mpsFolder(t, root, dev.UUID, 4096).Pipe(),
	} {
		if !strings.Contains(logs, want+"\n") {
			t.Errorf("the container on card %d lacks %s:\n%s", dev.Index, want, logs)
		}
	}

	createPod(t, e, gpuPod(ns, "two-cards", e.RealNode, ctr{units: 8, cards: 2}))
	waitFailedScheduling(t, e, ns, "two-cards", "isolates cards with MPS", "one card per container")

	if out := kubectlPlugin(t, e, "inspect", "gpushare", "-d", e.RealNode); !strings.Contains(out, "mps") {
		t.Errorf("kubectl inspect gpushare -d does not show the node's isolation mode:\n%s", out)
	}
}

// labelNode sets the node's gpushare.io/isolation label to value ("" removes it).
func labelNode(ctx context.Context, t *testing.T, e *Env, node, value string) {
	t.Helper()
	setNodeLabel(ctx, t, e, node, gpushare.LabelIsolation, value)
}

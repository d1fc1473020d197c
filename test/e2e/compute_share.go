//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/mps"
)

// CaseComputeShare: on an MPS node with two simulated T4s, two pods of 4 GiB with a 25 %
// compute share (gpushare.io/gpu-core) and one memory-only pod of 2 GiB: the schedulers put
// the memory-only pod on the other card than the shares (a card holds one kind), and the two
// shares together on one card; share-plugin hands both share pods one daemon, m4096-t25,
// whose control daemon was given set_default_active_thread_percentage 25, and the
// memory-only pod a daemon of every SM (m2048-t100). A pod asking 80 % fits no card (50 %
// committed on one, memory-only grants on the other) and fails scheduling naming the
// annotation; kubectl inspect gpushare -d shows the shares; with the node relabelled none a
// share pod fails scheduling there. The control daemon is a stand-in
// (test/e2e/fakempscontrol): the SM cap's effect on CUDA needs a GPU.
func CaseComputeShare(t *testing.T, e *Env) {
	requireRealNode(t, e)
	requireBinary(t, e, "extender", "share-plugin")
	ctx := testContext(t, 5*time.Minute)
	root, fake := startMPSLauncher(t, e)
	inv := restartSharePlugin(ctx, t, e, "t4:2", "GPUSHARE_MPS_ROOT="+root)
	labelNode(ctx, t, e, e.RealNode, string(gpushare.IsolationMPS))
	t.Cleanup(func() { labelNode(context.Background(), t, e, e.RealNode, "") })

	ns := newNamespace(t, e)
	sharing := func(name string, units int64, share string) *corev1.Pod {
		p := gpuPod(ns, name, e.RealNode, ctr{units: units})
		if share != "" {
			p.Annotations = map[string]string{gpushare.AnnotationComputeShare: "c0=" + share}
		}
		return p
	}
	running := map[string]*corev1.Pod{}
	for _, p := range []*corev1.Pod{sharing("a", 4, "25"), sharing("m", 2, ""), sharing("b", 4, "25")} {
		createPod(t, e, p)
		running[p.Name] = waitPod(t, e, ns, p.Name, 2*time.Minute, "Running", isRunning)
	}
	cardA, cardM, cardB := onlyCard(t, running["a"], inv), onlyCard(t, running["m"], inv), onlyCard(t, running["b"], inv)
	if cardA.UUID == cardM.UUID || cardB.UUID != cardA.UUID {
		t.Fatalf("cards: a %d, m %d, b %d; want a and b on one card, m on the other", cardA.Index, cardM.Index, cardB.Index)
	}
	f25, f100 := mpsFolderCap(t, root, cardA.UUID, 4096, 25), mpsFolderCap(t, root, cardM.UUID, 2048, 100)
	for name, f := range map[string]mps.Folder{"a": f25, "b": f25, "m": f100} {
		logs := podLogs(t, e, ns, name)
		if want := gpushare.EnvMPSPipeDirectory + "=" + f.Pipe() + "\n"; !strings.Contains(logs, want) {
			t.Errorf("pod %s lacks %s:\n%s", name, strings.TrimSpace(want), logs)
		}
	}
	for _, f := range []mps.Folder{f25, f100} {
		checkMPSDaemon(t, f, f.Card, fake)
	}

	createPod(t, e, sharing("big", 4, "80"))
	waitFailedScheduling(t, e, ns, "big", "no card with 80 percent compute free", gpushare.AnnotationComputeShare)
	if out := kubectlPlugin(t, e, "inspect", "gpushare", "-d", e.RealNode); !strings.Contains(out, "(core 25%)") || !strings.Contains(out, "Compute :") {
		t.Errorf("kubectl inspect gpushare -d does not show the compute shares:\n%s", out)
	}

	labelNode(ctx, t, e, e.RealNode, string(gpushare.IsolationNone))
	createPod(t, e, sharing("share-none", 2, "25"))
	waitFailedScheduling(t, e, ns, "share-none", "which only nodes labelled gpushare.io/isolation=mps enforce")
}

// mpsFolderCap is the daemon folder of cap mib MiB and pct percent of the SMs on card under
// root.
func mpsFolderCap(t *testing.T, root, card string, mib int64, pct int) mps.Folder {
	t.Helper()
	f, err := mps.FolderOf(root, card, mps.Cap{PinnedMemMiB: mib, ActiveThreadPct: pct})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

var res = gpushare.DefaultResources()

// Card shapes (MiB as NVML reports them; units are GiB rounded down).
var (
	t4   = card{model: "Tesla T4", mib: 15079}              // 14 units
	v100 = card{model: "Tesla V100-SXM2-16GB", mib: 16384}  // 16 units
	a100 = card{model: "NVIDIA A100-PCIE-40GB", mib: 40960} // 40 units
)

// CaseReferenceScenario: the user guide's three 4 GiB notebooks share the real node's 14 GiB
// T4 (Running, each told its card's UUID); a fourth stays Pending with a FailedScheduling event
// naming gpu-mem; inspect prints 12/14 (85%).
func CaseReferenceScenario(t *testing.T, e *Env) {
	requireBinary(t, e, "extender")
	referenceScenario(t, e, "")
}

// CasePluginReferenceScenario is CaseReferenceScenario with every pod scheduled by
// gpushare-scheduler (the framework plugin) instead of kube-scheduler + the extender.
func CasePluginReferenceScenario(t *testing.T, e *Env) {
	requireBinary(t, e, "gpushare-scheduler")
	referenceScenario(t, e, PluginSchedulerName)
}

// referenceScenario runs the reference scenario with the pods' schedulerName sched ("": the
// default scheduler).
func referenceScenario(t *testing.T, e *Env, sched string) {
	requireRealNode(t, e)
	ns := newNamespace(t, e)
	ctx := testContext(t, 5*time.Minute)
	notebooks := applyDeployments(t, e, ns, filepath.Join(e.Repo(), "deploy", "examples", "tf-notebook.yaml"), sched)
	if diff := cmp.Diff([]string{"tf-notebook", "tf-notebook-2", "tf-notebook-3"}, notebooks); diff != "" {
		t.Fatalf("deploy/examples/tf-notebook.yaml Deployments (-want,+got):\n%s", diff)
	}
	pods := map[string]*corev1.Pod{}
	for _, d := range notebooks {
		name := podOf(t, e, ns, d)
		pods[d] = waitPod(t, e, ns, name, 2*time.Minute, "Running", isRunning)
	}
	overflow := applyDeployments(t, e, ns, filepath.Join(e.Repo(), "deploy", "examples", "overflow", "tf-notebook-4.yaml"), sched)
	pending := podOf(t, e, ns, overflow[0])
	msg := waitFailedScheduling(t, e, ns, pending, string(res.Mem))
	t.Logf("%s is Pending: %s", pending, msg)

	node, err := e.Client.CoreV1().Nodes().Get(ctx, e.RealNode, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting node %s: %v", e.RealNode, err)
	}

	t.Run("node advertises 14 units from share-plugin", func(t *testing.T) {
		requireBinary(t, e, "share-plugin")
		q := node.Status.Allocatable[res.Mem]
		if q.Value() != 14 {
			t.Errorf("node %s allocatable %s = %s, want 14 (one T4: floor(15079/1024))", e.RealNode, res.Mem, q.String())
		}
		inv, src, err := res.NodeInventory(node)
		if err != nil || src != gpushare.FromAnnotation {
			t.Fatalf("node %s inventory: source %q, err %v; want share-plugin's annotation %s", e.RealNode, src, err, gpushare.AnnotationNodeInventory)
		}
		if inv.TotalUnits() != 14 || len(inv.Devices) != 1 {
			t.Errorf("node %s inventory %+v, want one card of 14 units", e.RealNode, inv)
		}
	})

	t.Run("each notebook's env names its card's UUID", func(t *testing.T) {
		requireBinary(t, e, "share-plugin")
		inv, _, err := res.NodeInventory(node)
		if err != nil {
			t.Fatalf("node %s inventory: %v", e.RealNode, err)
		}
		for _, d := range notebooks {
			p, err := e.Client.CoreV1().Pods(ns).Get(ctx, pods[d].Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			alloc, ok, err := res.ReadAllocation(p)
			if err != nil || !ok {
				t.Fatalf("pod %s: allocation annotations: ok=%v err=%v (annotations %v)", p.Name, ok, err, p.Annotations)
			}
			cards := alloc.Cards()
			if len(cards) != 1 {
				t.Fatalf("pod %s uses cards %v, want exactly one", p.Name, cards)
			}
			dev, ok := inv.Device(cards[0])
			if !ok || dev.UUID == "" {
				t.Fatalf("pod %s: card %d not in node inventory %+v", p.Name, cards[0], inv)
			}
			logs := podLogs(t, e, ns, p.Name)
			for _, want := range []string{
				gpushare.EnvVisibleDevices + "=" + dev.UUID,
				gpushare.EnvPodUnits + "=4",
				gpushare.EnvContainerUnits + "=4",
			} {
				if !strings.Contains(logs, want+"\n") {
					t.Errorf("pod %s (card %d): log lacks %q; log:\n%s", p.Name, cards[0], want, logs)
				}
			}
		}
	})

	t.Run("extender inspect shows 12 of 14", func(t *testing.T) {
		b, err := extenderInspect(ctx, e, e.RealNode)
		if err != nil {
			t.Fatal(err)
		}
		n, err := parseInspect(b)
		if err != nil {
			t.Fatal(err)
		}
		if n.Used != 12 || n.Total != 14 {
			t.Errorf("extender inspect %s: used/total %d/%d, want 12/14; JSON %s", e.RealNode, n.Used, n.Total, b)
		}
	})

	t.Run("kubectl inspect gpushare prints 12/14 (85%)", func(t *testing.T) {
		requireBinary(t, e, "kubectl-inspect-gpushare")
		out := kubectlPlugin(t, e, "inspect", "gpushare", e.RealNode)
		if !strings.Contains(out, "12/14 (85%)") {
			t.Errorf("kubectl inspect gpushare %s lacks \"12/14 (85%%)\":\n%s", e.RealNode, out)
		}
	})
}

// CaseRealNodeTwoCards: share-plugin restarted with two simulated T4s; pods of 10 units must
// go to different cards, and each container's NVIDIA_VISIBLE_DEVICES must name the UUID of the
// card its annotation points to (the old plugin could hand out the wrong card).
func CaseRealNodeTwoCards(t *testing.T, e *Env) {
	requireRealNode(t, e)
	requireBinary(t, e, "extender", "share-plugin")
	ctx := testContext(t, 5*time.Minute)
	inv := restartSharePlugin(ctx, t, e, "t4:2")
	ns := newNamespace(t, e)
	for _, n := range []string{"ten-a", "ten-b"} {
		createPod(t, e, gpuPod(ns, n, e.RealNode, ctr{units: 10}))
		waitPod(t, e, ns, n, 2*time.Minute, "Running", isRunning)
	}
	seen := map[int]bool{}
	for _, n := range []string{"ten-a", "ten-b"} {
		p, err := e.Client.CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		alloc, ok, err := res.ReadAllocation(p)
		if err != nil || !ok || len(alloc.Cards()) != 1 {
			t.Fatalf("pod %s: allocation %v ok=%v err=%v, want one card", n, alloc, ok, err)
		}
		idx := alloc.Cards()[0]
		seen[idx] = true
		dev, ok := inv.Device(idx)
		if !ok {
			t.Fatalf("pod %s: card %d not in inventory %+v", n, idx, inv)
		}
		logs := podLogs(t, e, ns, n)
		if want := gpushare.EnvVisibleDevices + "=" + dev.UUID + "\n"; !strings.Contains(logs, want) {
			t.Errorf("pod %s is on card %d (%s) but its log says:\n%s", n, idx, dev.UUID, logs)
		}
	}
	if len(seen) != 2 {
		t.Errorf("two 10-unit pods on 14-unit cards share card(s) %v", seen)
	}
}

// CaseKubeletRestart: kubelet restarts wipe its device-plugin folder; share-plugin must
// register again so the node keeps advertising 14 units and new pods still get their card.
func CaseKubeletRestart(t *testing.T, e *Env) {
	requireRealNode(t, e)
	requireBinary(t, e, "extender", "share-plugin")
	ctx := testContext(t, 5*time.Minute)
	ns := newNamespace(t, e)
	createPod(t, e, gpuPod(ns, "before", e.RealNode, ctr{units: 4}))
	waitPod(t, e, ns, "before", 2*time.Minute, "Running", isRunning)

	if err := e.RestartComponent(ctx, "kubelet"); err != nil {
		t.Fatalf("restarting kubelet: %v", err)
	}
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := e.Client.CoreV1().Nodes().Get(ctx, e.RealNode, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		q := n.Status.Allocatable[res.Mem]
		return q.Value() == 14, nil
	})
	if err != nil {
		t.Fatalf("node %s does not advertise 14 units of %s after the kubelet restart (share-plugin did not register again?): %v", e.RealNode, res.Mem, err)
	}
	createPod(t, e, gpuPod(ns, "after", e.RealNode, ctr{units: 4}))
	p := waitPod(t, e, ns, "after", 2*time.Minute, "Running", isRunning)
	node, err := e.Client.CoreV1().Nodes().Get(ctx, e.RealNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inv, _, err := res.NodeInventory(node)
	if err != nil {
		t.Fatal(err)
	}
	alloc, ok, err := res.ReadAllocation(p)
	if err != nil || !ok || len(alloc.Cards()) != 1 {
		t.Fatalf("pod after: allocation %v ok=%v err=%v", alloc, ok, err)
	}
	dev, _ := inv.Device(alloc.Cards()[0])
	logs := podLogs(t, e, ns, "after")
	if want := gpushare.EnvVisibleDevices + "=" + dev.UUID + "\n"; dev.UUID == "" || !strings.Contains(logs, want) {
		t.Errorf("pod after (card %d, %q): log lacks %q:\n%s", alloc.Cards()[0], dev.UUID, want, logs)
	}
	before, err := e.Client.CoreV1().Pods(ns).Get(ctx, "before", metav1.GetOptions{})
	if err != nil || !isRunning(before) {
		t.Errorf("pod before is not Running after the kubelet restart: %v", err)
	}
}

// CasePerCardFit: a node with two 16-unit cards, each holding 8, rejects a 10-unit pod with
// the per-card reason although the node still has 16 free in total.
func CasePerCardFit(t *testing.T, e *Env) {
	requireBinary(t, e, "extender")
	perCardFit(t, e, "")
}

// CasePluginPerCardFit is CasePerCardFit through gpushare-scheduler: the same reason.
func CasePluginPerCardFit(t *testing.T, e *Env) {
	requireBinary(t, e, "gpushare-scheduler")
	perCardFit(t, e, PluginSchedulerName)
}

func perCardFit(t *testing.T, e *Env, sched string) {
	ns := newNamespace(t, e)
	node := newKwokNode(t, e, "percard", v100, v100)
	// One container over two cards takes 8 on each (binpack would stack single-card 8s).
	createPod(t, e, scheduledBy(sched, gpuPod(ns, "filler", node, ctr{units: 16, cards: 2})))
	filler := waitPod(t, e, ns, "filler", time.Minute, "Running", isRunning)
	wantCardUsage(t, filler, gpushare.CardUnits{0: 8, 1: 8})
	createPod(t, e, scheduledBy(sched, gpuPod(ns, "big", node, ctr{units: 10})))
	msg := waitFailedScheduling(t, e, ns, "big", "need 10 on one card; largest free 8 (card0 8/16, card1 8/16)")
	t.Logf("big is Pending: %s", msg)
}

// CaseDeleteFreesMemory: with a 14-unit card full (3 × 4), a fourth 4-unit pod is Pending;
// deleting one pod frees its units and the pending pod is then scheduled.
func CaseDeleteFreesMemory(t *testing.T, e *Env) {
	requireBinary(t, e, "extender")
	ns := newNamespace(t, e)
	node := newKwokNode(t, e, "delete", t4)
	for _, n := range []string{"a", "b", "c"} {
		createPod(t, e, gpuPod(ns, n, node, ctr{units: 4}))
		waitPod(t, e, ns, n, time.Minute, "Running", isRunning)
	}
	createPod(t, e, gpuPod(ns, "d", node, ctr{units: 4}))
	waitFailedScheduling(t, e, ns, "d", string(res.Mem))
	deletePod(t, e, ns, "a")
	waitPod(t, e, ns, "d", 90*time.Second, "Running after a was deleted", isRunning)
	ctx := testContext(t, 30*time.Second)
	b, err := extenderInspect(ctx, e, node)
	if err != nil {
		t.Fatal(err)
	}
	n, err := parseInspect(b)
	if err != nil {
		t.Fatal(err)
	}
	if n.Used != 12 {
		t.Errorf("extender inspect %s: used %d, want 12 (b, c, d); JSON %s", node, n.Used, b)
	}
}

// CaseExtenderRestart: kill -9 the extender and start it again: its inspect output for a busy
// node is identical before and after (state rebuilt from pod annotations), and a pod created
// while it was down is scheduled once it is back.
func CaseExtenderRestart(t *testing.T, e *Env) {
	requireBinary(t, e, "extender")
	ns := newNamespace(t, e)
	busy := newKwokNode(t, e, "restart-busy", v100, v100, v100, v100)
	spare := newKwokNode(t, e, "restart-spare", t4)
	createPod(t, e, gpuPod(ns, "one", busy, ctr{units: 8}))
	createPod(t, e, gpuPod(ns, "two-cards", busy, ctr{units: 16, cards: 2}))
	createPod(t, e, gpuPod(ns, "two-containers", busy, ctr{units: 4}, ctr{units: 6}))
	for _, n := range []string{"one", "two-cards", "two-containers"} {
		waitPod(t, e, ns, n, time.Minute, "Running", isRunning)
	}
	ctx := testContext(t, 3*time.Minute)
	before := inspectSnapshot(ctx, t, e, busy)

	pid, err := e.ExtenderPID()
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 extender (pid %d): %v", pid, err)
	}
	t.Cleanup(func() {
		// Whatever happened, leave an extender running for the next tests.
		_ = e.StartComponent(context.Background(), "extender")
	})
	waitGone(t, pid)
	createPod(t, e, gpuPod(ns, "while-down", spare, ctr{units: 4}))
	// The scheduler tried, could not reach the extender (ignorable: false), and left the pod
	// Pending.
	waitFailedScheduling(t, e, ns, "while-down", "refused")
	stayUnbound(t, e, ns, "while-down", 3*time.Second)

	if err := e.StartComponent(ctx, "extender"); err != nil {
		t.Fatalf("restarting the extender: %v", err)
	}
	after := inspectSnapshot(ctx, t, e, busy)
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("inspect %s changed across the restart (-before,+after):\n%s", busy, diff)
	}
	waitPod(t, e, ns, "while-down", 90*time.Second, "Running after the extender came back", isRunning)
}

// CaseMultiContainerMultiCard: two-container and multi-card pods get distinct cards with the
// right units (annotations checked against the node's cards), and a pod too big for the small
// card of a mixed node lands on the big one.
func CaseMultiContainerMultiCard(t *testing.T, e *Env) {
	requireBinary(t, e, "extender")
	multiContainerMultiCard(t, e, "")
}

// CasePluginMultiContainerMultiCard is CaseMultiContainerMultiCard through
// gpushare-scheduler.
func CasePluginMultiContainerMultiCard(t *testing.T, e *Env) {
	requireBinary(t, e, "gpushare-scheduler")
	multiContainerMultiCard(t, e, PluginSchedulerName)
}

func multiContainerMultiCard(t *testing.T, e *Env, sched string) {
	ns := newNamespace(t, e)
	node := newKwokNode(t, e, "multi", v100, v100, v100, v100)
	tests := []struct {
		name       string
		containers []ctr
	}{
		{"two-containers-12-12", []ctr{{units: 12}, {units: 12}}}, // 24 > 16: must split over two cards
		{"one-container-two-cards", []ctr{{units: 16, cards: 2}}}, // 8 on each of two cards
		{"mixed", []ctr{{units: 4}, {units: 8, cards: 2}}},
	}
	for _, tc := range tests {
		createPod(t, e, scheduledBy(sched, gpuPod(ns, tc.name, node, tc.containers...)))
	}
	capacity := map[int]int64{0: 16, 1: 16, 2: 16, 3: 16}
	used := map[int]int64{}
	for _, tc := range tests {
		p := waitPod(t, e, ns, tc.name, time.Minute, "Running", isRunning)
		alloc, ok, err := res.ReadAllocation(p)
		if err != nil || !ok {
			t.Fatalf("pod %s: allocation: ok=%v err=%v", tc.name, ok, err)
		}
		for i, c := range tc.containers {
			cards := alloc.App[i]
			want := c.cards
			if want == 0 {
				want = 1
			}
			if int64(len(cards)) != want {
				t.Errorf("pod %s container %d: cards %v, want %d distinct cards", tc.name, i, cards, want)
			}
			for idx, u := range cards {
				if u != c.units/want {
					t.Errorf("pod %s container %d: %d units on card %d, want %d", tc.name, i, u, idx, c.units/want)
				}
			}
		}
		if tc.name == "two-containers-12-12" {
			if cardsOf(alloc.App[0]) == cardsOf(alloc.App[1]) {
				t.Errorf("pod %s: both containers on card %v, which has only 16", tc.name, alloc.App[0])
			}
		}
		for idx, u := range alloc.CardUsage(p) {
			used[idx] += u
		}
	}
	for idx, u := range used {
		if u > capacity[idx] {
			t.Errorf("card %d holds %d units, capacity %d (usage %v)", idx, u, capacity[idx], used)
		}
	}
	// The extender learns the pods from its own watch: with gpushare-scheduler binding, the pods
	// may be Running before that watch has delivered their records, so wait for it to agree.
	ctx := testContext(t, 30*time.Second)
	var diff string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		b, err := extenderInspect(ctx, e, node)
		if err != nil {
			return false, err
		}
		n, err := parseInspect(b)
		if err != nil {
			return false, err
		}
		gotUsed := map[int]int64{}
		for _, d := range n.Cards {
			if d.Used != 0 {
				gotUsed[d.Index] = d.Used
			}
		}
		diff = cmp.Diff(used, gotUsed)
		return diff == "", nil
	})
	if err != nil {
		t.Errorf("extender per-card usage vs pod annotations after 30s (-annotations,+extender): %v\n%s", err, diff)
	}

	mixed := newKwokNode(t, e, "mixed", a100, t4)
	createPod(t, e, scheduledBy(sched, gpuPod(ns, "twenty", mixed, ctr{units: 20})))
	p := waitPod(t, e, ns, "twenty", time.Minute, "Running", isRunning)
	alloc, _, err := res.ReadAllocation(p)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{0}, alloc.Cards()); diff != "" {
		t.Errorf("20-unit pod on A100-40GB + T4 node: cards (-want,+got):\n%s", diff)
	}
}

// CaseDeployManifestsDryRun: every manifest under deploy/ passes server-side dry-run against
// the real apiserver; the scheduler configuration is checked as a ConfigMap (it is not an API
// object; kube-scheduler of this cluster already runs with it).
func CaseDeployManifestsDryRun(t *testing.T, e *Env) {
	ctx := testContext(t, 2*time.Minute)
	var files []string
	err := filepath.WalkDir(filepath.Join(e.Repo(), "deploy"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "templates" {
			return filepath.SkipDir // Helm templates are not plain YAML
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) &&
			d.Name() != "kustomization.yaml" && d.Name() != "Chart.yaml" && d.Name() != "values.yaml" {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking deploy/: %v", err)
	}
	checked := 0
	kinds := map[string]bool{}
	for _, f := range files {
		rel, _ := filepath.Rel(e.Repo(), f)
		for i, obj := range decodeObjects(t, f) {
			name := fmt.Sprintf("%s#%d %s %s", rel, i, obj.GetKind(), obj.GetName())
			switch {
			case obj.GetKind() == "KubeSchedulerConfiguration":
				raw, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				obj = configMapOf("gpushare-scheduler-config", filepath.Base(f), string(raw))
			case strings.Contains(obj.GetAPIVersion(), "krew.googlecontainertools.github.com"):
				t.Logf("%s: krew plugin manifest, not an API object; skipped", name)
				continue
			case strings.HasPrefix(obj.GetAPIVersion(), "kueue.x-k8s.io/"):
				t.Logf("%s: needs Kueue's CRDs; dry-run by CaseKueueRecipeDryRun", name)
				continue
			}
			if err := dryRunApply(ctx, e, obj); err != nil {
				t.Errorf("%s: server-side dry-run: %v", name, err)
				continue
			}
			checked++
			kinds[filepath.Base(filepath.Dir(rel))+"/"+obj.GetKind()] = true
			t.Logf("%s: dry-run ok", name)
		}
	}
	want := []string{"extender/Deployment", "extender/Service", "extender/ServiceAccount",
		"extender/ClusterRole", "extender/ClusterRoleBinding", "scheduler/ConfigMap",
		"gpushare-scheduler/Deployment", "gpushare-scheduler/ConfigMap", "gpushare-scheduler/ClusterRoleBinding",
		"admission/ValidatingAdmissionPolicy", "admission/ValidatingAdmissionPolicyBinding"}
	if _, err := os.Stat(filepath.Join(e.Repo(), "deploy", "share-plugin")); err == nil {
		want = append(want, "share-plugin/DaemonSet")
	}
	for _, k := range want {
		if !kinds[k] {
			t.Errorf("no %s among the dry-run objects of deploy/ (got %v)", k, kinds)
		}
	}
	if checked < 5 {
		t.Errorf("only %d objects dry-run from deploy/ (%v); want the extender's, the scheduler config, the examples", checked, files)
	}
}

// --- helpers used only by the cases -----------------------------------------------------

// applyDeployments creates the Deployments of a manifest file in ns, their pods scheduled by
// sched ("": as the file says), and returns their names.
func applyDeployments(t *testing.T, e *Env, ns, file string, sched string) []string {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	var names []string
	for _, obj := range decodeObjects(t, file) {
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &d); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		d.Namespace = ns
		if sched != "" {
			d.Spec.Template.Spec.SchedulerName = sched
		}
		if _, err := e.Client.AppsV1().Deployments(ns).Create(ctx, &d, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating Deployment %s from %s: %v", d.Name, file, err)
		}
		names = append(names, d.Name)
	}
	return names
}

// podOf waits for the single pod of Deployment d (label app=d) and returns its name.
func podOf(t *testing.T, e *Env, ns, d string) string {
	t.Helper()
	ctx := testContext(t, time.Minute)
	var name string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 50*time.Second, true, func(ctx context.Context) (bool, error) {
		pods, err := e.Client.CoreV1().Pods(ns).List(ctx, metav1ListOptions("app="+d))
		if err != nil || len(pods.Items) != 1 {
			return false, nil
		}
		name = pods.Items[0].Name
		return true, nil
	})
	if err != nil {
		t.Fatalf("Deployment %s/%s: no single pod: %v", ns, d, err)
	}
	return name
}

func podLogs(t *testing.T, e *Env, ns, name string) string {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	var out []byte
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		b, err := e.Client.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil || len(b) == 0 {
			return false, nil
		}
		out = b
		return true, nil
	})
	if err != nil {
		t.Fatalf("logs of pod %s/%s: %v", ns, name, err)
	}
	return string(out)
}

// kubectlPlugin runs the pinned kubectl with bin/ on PATH, so `kubectl inspect gpushare`
// finds our plugin the way a user's kubectl does.
func kubectlPlugin(t *testing.T, e *Env, args ...string) string {
	t.Helper()
	ctx := testContext(t, time.Minute)
	cmd := exec.CommandContext(ctx, filepath.Join(e.cfg.k8sBin, "kubectl"), args...)
	cmd.Env = append(os.Environ(),
		"KUBECONFIG="+e.Kubeconfig,
		"PATH="+filepath.Join(e.Repo(), "bin")+":"+e.cfg.k8sBin+":"+os.Getenv("PATH"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// inspectSnapshot is the extender's view of one node with pods in a stable order.
func inspectSnapshot(ctx context.Context, t *testing.T, e *Env, node string) gpushare.InspectNode {
	t.Helper()
	b, err := extenderInspect(ctx, e, node)
	if err != nil {
		t.Fatal(err)
	}
	n, err := parseInspect(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range n.Cards {
		sort.Slice(d.Pods, func(i, j int) bool {
			return d.Pods[i].Namespace+"/"+d.Pods[i].Name < d.Pods[j].Namespace+"/"+d.Pods[j].Name
		})
	}
	return n
}

// waitGone waits until pid no longer runs (a zombie counts as gone: its exe link is gone).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	if !exited(pid, 10*time.Second) {
		t.Fatalf("process %d still runs 10s after SIGKILL", pid)
	}
}

func cardsOf(cu gpushare.CardUnits) string {
	var idx []int
	for i := range cu {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	return fmt.Sprint(idx)
}

// decodeObjects reads every YAML document of a file as unstructured objects (empty ones
// skipped).
func decodeObjects(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return decodeStream(t, file, f)
}

// decodeStream reads every YAML or JSON document of r as unstructured objects (empty ones
// skipped); name names r in errors.
func decodeStream(t *testing.T, name string, r io.Reader) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("decoding %s: %v", name, err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

func configMapOf(name, key, data string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata":   map[string]any{"name": name, "namespace": "kube-system"},
		"data":       map[string]any{key: data},
	}}
}

// dryRunApply server-side applies obj with dryRun=All. Namespaces that objects live in are
// created for real first (a dry-run Namespace does not make later objects valid).
func dryRunApply(ctx context.Context, e *Env, obj *unstructured.Unstructured) error {
	return serverSideApply(ctx, e, obj, true)
}

// serverSideApply applies obj (for real unless dryRun), creating its namespace first.
func serverSideApply(ctx context.Context, e *Env, obj *unstructured.Unstructured, dryRun bool) error {
	gvk := obj.GroupVersionKind()
	mapping, err := e.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("no API for %s: %w", gvk, err)
	}
	ri := e.Dynamic.Resource(mapping.Resource)
	var client interface {
		Patch(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (*unstructured.Unstructured, error)
	} = ri
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := obj.GetNamespace()
		if ns == "" {
			ns = metav1.NamespaceDefault
		}
		if err := ensureNamespace(ctx, e, ns); err != nil {
			return err
		}
		client = ri.Namespace(ns)
	}
	body, err := obj.MarshalJSON()
	if err != nil {
		return fmt.Errorf("encoding: %w", err)
	}
	force := true
	opts := metav1.PatchOptions{FieldManager: "gpushare-e2e", Force: &force}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = client.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, opts)
	return err
}

func ensureNamespace(ctx context.Context, e *Env, ns string) error {
	_, err := e.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	return nil
}

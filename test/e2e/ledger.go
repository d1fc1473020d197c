//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// The ledger's standing checks, run at the end of every chaos case: no card holds more than
// its size, counting what the pods' records say and, on the real node, what their containers
// really got; and `kubectl inspect gpushare --check` finds the extender, the pods and
// share-plugin in agreement.

// assertLedgerSound fails the test when a card is over-committed or the three views of the
// ledger disagree. The check is polled for up to a minute: informers and share-plugin's
// record of a just-admitted pod arrive asynchronously.
func assertLedgerSound(t *testing.T, e *Env) {
	t.Helper()
	ctx := testContext(t, 3*time.Minute)
	if over := overCommittedCards(ctx, t, e); len(over) > 0 {
		t.Errorf("over-committed cards by the pods' records:\n%s", strings.Join(over, "\n"))
	}
	if e.RealNode != "" {
		assertContainersMatchRecords(ctx, t, e)
	}
	var out string
	code := -1
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		// Each run is bounded on its own, so that a slow one on a loaded machine leaves the
		// output of the last complete run to report rather than a run killed mid-way.
		cctx, cancel := context.WithTimeout(ctx, 45*time.Second)
		defer cancel()
		o, c := runCheck(cctx, e)
		if cctx.Err() != nil {
			t.Logf("kubectl inspect gpushare --check did not finish in 45s")
			return false, nil
		}
		out, code = o, c
		return code == 0, nil
	})
	if err != nil {
		t.Errorf("kubectl inspect gpushare --check exited %d:\n%s", code, out)
	}
}

// runCheck runs the inspect plugin's --check against this cluster's extender and the real
// node's share-plugin, returning its output and exit code.
func runCheck(ctx context.Context, e *Env) (string, int) {
	args := append([]string{"--check"}, e.extenderCheckArgs()...)
	if e.RealNode != "" {
		args = append(args, "--share-plugin-urls", e.SharePluginURL)
	}
	cmd := exec.CommandContext(ctx, e.Bin("kubectl-inspect-gpushare"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.Kubeconfig)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err == nil {
		return out.String(), 0
	}
	if x, ok := err.(*exec.ExitError); ok {
		return out.String(), x.ExitCode()
	}
	return out.String() + "\n" + err.Error(), -1
}

// overCommittedCards sums, per card of every gpushare node, the units the non-terminated pods
// bound there hold according to their allocation annotations, and lists the cards above
// their size.
func overCommittedCards(ctx context.Context, t *testing.T, e *Env) []string {
	t.Helper()
	nodes, err := e.Client.CoreV1().Nodes().List(ctx, metav1ListOptions(gpushare.NodeLabelKey+"="+gpushare.NodeLabelValue))
	if err != nil {
		t.Fatalf("listing nodes: %v", err)
	}
	size := map[string]map[int]int64{}
	for i := range nodes.Items {
		inv, _, err := res.NodeInventory(&nodes.Items[i])
		if err != nil {
			continue
		}
		size[nodes.Items[i].Name] = map[int]int64{}
		for _, d := range inv.Devices {
			size[nodes.Items[i].Name][d.Index] = d.Units
		}
	}
	used := map[string]map[int]int64{}
	var cont string
	for {
		l, err := e.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
			FieldSelector: "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed", Limit: 1000, Continue: cont})
		if err != nil {
			t.Fatalf("listing pods: %v", err)
		}
		for i := range l.Items {
			p := &l.Items[i]
			if size[p.Spec.NodeName] == nil {
				continue
			}
			a, ok, err := res.ReadAllocation(p)
			if err != nil || !ok {
				continue // --check reports an unreadable record
			}
			if used[p.Spec.NodeName] == nil {
				used[p.Spec.NodeName] = map[int]int64{}
			}
			for c, u := range a.CardUsage(p) {
				used[p.Spec.NodeName][c] += u
			}
		}
		if cont = l.Continue; cont == "" {
			break
		}
	}
	var out []string
	for node, cards := range used {
		for c, u := range cards {
			if u > size[node][c] {
				out = append(out, fmt.Sprintf("  %s card %d: %d units recorded, size %d", node, c, u, size[node][c]))
			}
		}
	}
	sort.Strings(out)
	return out
}

// assertContainersMatchRecords reads, for every running single-container gpu pod on the real
// node, the card its container really got (NVIDIA_VISIBLE_DEVICES in the gpuenv log) and
// fails when it is not the card the pod's record names, or when the cards hold more than
// their size counting what the containers got.
func assertContainersMatchRecords(ctx context.Context, t *testing.T, e *Env) {
	t.Helper()
	node, err := e.Client.CoreV1().Nodes().Get(ctx, e.RealNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inv, _, err := res.NodeInventory(node)
	if err != nil {
		t.Fatalf("inventory of %s: %v", e.RealNode, err)
	}
	byUUID := map[string]gpushare.Device{}
	for _, d := range inv.Devices {
		byUUID[d.UUID] = d
	}
	pods, err := e.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: "spec.nodeName=" + e.RealNode + ",status.phase=Running"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]int64{}
	for i := range pods.Items {
		p := &pods.Items[i]
		req, err := res.PodRequest(p)
		if err != nil || len(req.Containers) != 1 || len(p.Spec.Containers) != 1 || p.Spec.Containers[0].Image != testImage {
			continue
		}
		env := containerEnv(t, podLogs(t, e, p.Namespace, p.Name))
		var cards []int
		for _, u := range strings.Split(env[gpushare.EnvVisibleDevices], ",") {
			d, ok := byUUID[u]
			if !ok {
				t.Errorf("pod %s/%s got device %q, not a card of %s", p.Namespace, p.Name, u, e.RealNode)
				continue
			}
			cards = append(cards, d.Index)
			got[d.Index] += req.Containers[0].PerCard()
		}
		sort.Ints(cards)
		a, ok, err := res.ReadAllocation(p)
		if err != nil || !ok {
			t.Errorf("pod %s/%s runs on cards %v but its record is unreadable (ok=%v): %v", p.Namespace, p.Name, cards, ok, err)
			continue
		}
		if rec := a.Cards(); fmt.Sprint(rec) != fmt.Sprint(cards) {
			t.Errorf("pod %s/%s: its container got cards %v, its record says %v (%s=%s)", p.Namespace, p.Name,
				cards, rec, gpushare.AnnotationAllocation, p.Annotations[gpushare.AnnotationAllocation])
		}
	}
	for _, d := range inv.Devices {
		if got[d.Index] > d.Units {
			t.Errorf("%s card %d: containers got %d units, the card has %d", e.RealNode, d.Index, got[d.Index], d.Units)
		}
	}
}

// containerEnv parses gpuenv's KEY=value lines.
func containerEnv(t *testing.T, log string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, l := range strings.Split(log, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			out[k] = v
		}
	}
	return out
}

// patchAllocation overwrites a pod's allocation annotation as its tenant could.
func patchAllocation(ctx context.Context, t *testing.T, e *Env, ns, name, value string) {
	t.Helper()
	body := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, gpushare.AnnotationAllocation, strconv.Quote(value))
	if _, err := e.Client.CoreV1().Pods(ns).Patch(ctx, name, "application/merge-patch+json", []byte(body), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching %s/%s allocation to %s: %v", ns, name, value, err)
	}
}

// recordedCards is the card indexes a pod's record gives it.
func recordedCards(ctx context.Context, t *testing.T, e *Env, ns, name string) (*corev1.Pod, []int) {
	t.Helper()
	p, err := e.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, ok, err := res.ReadAllocation(p)
	if err != nil || !ok {
		return p, nil
	}
	return p, a.Cards()
}

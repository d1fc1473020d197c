//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// kwokAnnotation makes kwok manage a node (cluster-up starts kwok with this selector).
const kwokAnnotation = "kwok.x-k8s.io/node"

// testImage is the local image hack/build-images.sh builds and cluster-up imports.
const testImage = "gpushare.local/gpuenv:v1"

func metav1ListOptions(labelSelector string) metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: labelSelector}
}

// testContext is a context bounded by d and by the test's deadline.
func testContext(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// newNamespace creates a namespace for one test, waits for its default service account (pods
// are refused without it) and deletes it at the end.
func newNamespace(t *testing.T, e *Env) string {
	t.Helper()
	ctx := testContext(t, 2*time.Minute)
	name := "e2e-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.TrimRight(name, "-") + "-" + rand.String(4)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := e.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		zero := int64(0)
		// Controllers first, or their ReplicaSets make new pods while the old ones go, and
		// those reach the real node as the next test starts.
		_ = e.Client.AppsV1().Deployments(name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = e.Client.AppsV1().ReplicaSets(name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = e.Client.CoreV1().Pods(name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		_ = e.Client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
		// The next test starts on a quiet node: this namespace's pods are gone (bounded: a
		// pod stuck terminating must not stall the suite, it only risks the next test).
		_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			pods, err := e.Client.CoreV1().Pods(name).List(ctx, metav1.ListOptions{})
			return err == nil && len(pods.Items) == 0, nil
		})
	})
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := e.Client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("namespace %s: default service account never appeared: %v", name, err)
	}
	return name
}

// card is one card of a kwok node.
type card struct {
	model string
	mib   int64
}

// newKwokNode creates a kwok-managed node labelled cgpu=true whose cards are published in the
// inventory annotation (units = floor(MiB/1024)) and whose allocatable carries the totals.
// The node is deleted at the end of the test.
func newKwokNode(t *testing.T, e *Env, prefix string, cards ...card) string {
	t.Helper()
	return newKwokNodeCap(t, e, prefix, "110", cards...)
}

// newKwokNodeCap is newKwokNode with room for maxPods pods.
func newKwokNodeCap(t *testing.T, e *Env, prefix, maxPods string, cards ...card) string {
	t.Helper()
	ctx := testContext(t, time.Minute)
	name := prefix + "-" + rand.String(5)
	inv := gpushare.Inventory{Unit: gpushare.GiB}
	var total int64
	for i, c := range cards {
		units := gpushare.GiB.UnitsOf(c.mib)
		inv.Devices = append(inv.Devices, gpushare.Device{
			Index: i, UUID: fmt.Sprintf("GPU-%s-%08d", name, i), Model: c.model,
			Units: units, MemoryMiB: c.mib, Healthy: true,
		})
		total += units
	}
	invJSON, err := inv.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:            resource.MustParse("64"),
		corev1.ResourceMemory:         resource.MustParse("512Gi"),
		corev1.ResourcePods:           resource.MustParse(maxPods),
		gpushare.DefaultMemResource:   *resource.NewQuantity(total, resource.DecimalSI),
		gpushare.DefaultCountResource: *resource.NewQuantity(int64(len(cards)), resource.DecimalSI),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Annotations: map[string]string{
				kwokAnnotation:                   "fake",
				gpushare.AnnotationNodeInventory: invJSON,
			},
			Labels: map[string]string{
				gpushare.NodeLabelKey: gpushare.NodeLabelValue,
				corev1.LabelHostname:  name,
				"type":                "kwok",
			},
		},
		Status: corev1.NodeStatus{Capacity: res, Allocatable: res},
	}
	if _, err := e.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating kwok node %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = e.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	})
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := e.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("kwok node %s never became Ready: %v", name, err)
	}
	return name
}

// ctr is one container of a test pod: units of gpu-mem over cards distinct cards (0: no
// gpu-count limit, i.e. one card).
type ctr struct {
	units int64
	cards int64
}

// gpuPod is a pod pinned (by node selector, so it still goes through the scheduler) to node.
func gpuPod(ns, name, node string, containers ...ctr) *corev1.Pod {
	no := false
	grace := int64(2)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"e2e": name}},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{corev1.LabelHostname: node},
			AutomountServiceAccountToken:  &no,
			TerminationGracePeriodSeconds: &grace,
		},
	}
	for i, c := range containers {
		lim := corev1.ResourceList{gpushare.DefaultMemResource: *resource.NewQuantity(c.units, resource.DecimalSI)}
		if c.cards > 0 {
			lim[gpushare.DefaultCountResource] = *resource.NewQuantity(c.cards, resource.DecimalSI)
		}
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{
			Name:            "c" + strconv.Itoa(i),
			Image:           testImage,
			ImagePullPolicy: corev1.PullNever,
			Resources:       corev1.ResourceRequirements{Limits: lim},
		})
	}
	return p
}

func createPod(t *testing.T, e *Env, p *corev1.Pod) {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	if _, err := e.Client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod %s/%s: %v", p.Namespace, p.Name, err)
	}
}

// waitPod polls the pod until cond holds, failing the test after timeout with the pod's
// phase and its latest events.
func waitPod(t *testing.T, e *Env, ns, name string, timeout time.Duration, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	ctx := testContext(t, timeout+10*time.Second)
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := e.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = p
		return cond(p), nil
	})
	if err != nil {
		phase := "not found"
		if last != nil {
			phase = string(last.Status.Phase) + " on node " + strconv.Quote(last.Spec.NodeName)
		}
		t.Fatalf("pod %s/%s: not %s after %v (%s); events:\n%s", ns, name, what, timeout, phase, podEvents(e, ns, name))
	}
	return last
}

func isRunning(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }

func podEvents(e *Env, ns, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	evs, err := e.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String(),
	})
	if err != nil {
		return "  (listing events: " + err.Error() + ")"
	}
	var b strings.Builder
	for _, ev := range evs.Items {
		fmt.Fprintf(&b, "  %s %s: %s\n", ev.Type, ev.Reason, ev.Message)
	}
	return b.String()
}

// waitFailedScheduling waits for a FailedScheduling event of the pod whose message contains
// every one of want, and returns that message. The pod must still be unbound.
func waitFailedScheduling(t *testing.T, e *Env, ns, name string, want ...string) string {
	t.Helper()
	ctx := testContext(t, 90*time.Second)
	var msg string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 80*time.Second, true, func(ctx context.Context) (bool, error) {
		evs, err := e.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
			FieldSelector: fields.AndSelectors(
				fields.OneTermEqualSelector("involvedObject.name", name),
				fields.OneTermEqualSelector("reason", "FailedScheduling"),
			).String(),
		})
		if err != nil {
			return false, nil
		}
		for _, ev := range evs.Items {
			ok := true
			for _, w := range want {
				ok = ok && strings.Contains(ev.Message, w)
			}
			if ok {
				msg = ev.Message
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s: no FailedScheduling event containing %q; events:\n%s", ns, name, want, podEvents(e, ns, name))
	}
	p, err := e.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting pod %s/%s: %v", ns, name, err)
	}
	if p.Spec.NodeName != "" {
		t.Fatalf("pod %s/%s was bound to %s, want it Pending", ns, name, p.Spec.NodeName)
	}
	return msg
}

// stayUnbound fails the test when the pod gets a node within d.
func stayUnbound(t *testing.T, e *Env, ns, name string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	ctx := testContext(t, d+10*time.Second)
	for time.Now().Before(deadline) {
		p, err := e.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && p.Spec.NodeName != "" {
			t.Fatalf("pod %s/%s was bound to %s, want it Pending", ns, name, p.Spec.NodeName)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func deletePod(t *testing.T, e *Env, ns, name string) {
	t.Helper()
	ctx := testContext(t, time.Minute)
	if err := e.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting pod %s/%s: %v", ns, name, err)
	}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 50*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := e.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s still exists after delete: %v", ns, name, err)
	}
}

// extenderInspect returns the raw JSON of the extender's inspect endpoint for one node.
func extenderInspect(ctx context.Context, e *Env, node string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.ExtenderDiagnosticsURL+gpushare.InspectPath+"/"+node, nil)
	if err != nil {
		return nil, err
	}
	resp, err := e.ExtenderHTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET inspect/%s: %w", node, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading inspect/%s: %w", node, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET inspect/%s: %s: %s", node, resp.Status, b)
	}
	return b, nil
}

// parseInspect decodes the extender's answer for one node.
func parseInspect(b []byte) (gpushare.InspectNode, error) {
	var r gpushare.InspectReport
	if err := json.Unmarshal(b, &r); err != nil {
		return gpushare.InspectNode{}, fmt.Errorf("decoding inspect JSON %s: %w", b, err)
	}
	if len(r.Nodes) != 1 {
		return gpushare.InspectNode{}, fmt.Errorf("inspect JSON %s: %d nodes, want 1", b, len(r.Nodes))
	}
	return r.Nodes[0], nil
}

// requireBinary skips the test when one of our binaries is not built yet (components are
// written in parallel); it never fakes a pass.
func requireBinary(t *testing.T, e *Env, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := os.Stat(e.Bin(name)); err != nil {
			t.Skipf("bin/%s is not built (make build): %v", name, err)
		}
	}
}

// requireRealNode skips the case when the cluster has no real kubelet node (kwok only).
func requireRealNode(t *testing.T, e *Env) {
	t.Helper()
	if e.RealNode == "" {
		t.Skip("no real node: " + e.NoRealNodeWhy)
	}
}

// wantCardUsage fails the test unless the pod's allocation record gives it want on its cards.
func wantCardUsage(t *testing.T, pod *corev1.Pod, want gpushare.CardUnits) {
	t.Helper()
	alloc, _, err := res.ReadAllocation(pod)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, alloc.CardUsage(pod)); diff != "" {
		t.Fatalf("%s card usage (-want,+got):\n%s", pod.Name, diff)
	}
}

// onlyCard is the card of inv that pod p's allocation record names, failing the test unless
// the record is readable and names exactly one card of inv.
func onlyCard(t *testing.T, p *corev1.Pod, inv gpushare.Inventory) gpushare.Device {
	t.Helper()
	alloc, ok, err := res.ReadAllocation(p)
	if err != nil || !ok || len(alloc.Cards()) != 1 {
		t.Fatalf("pod %s/%s: allocation %v ok=%v err=%v, want one card", p.Namespace, p.Name, alloc, ok, err)
	}
	dev, ok := inv.Device(alloc.Cards()[0])
	if !ok {
		t.Fatalf("pod %s/%s: card %d not in the inventory %+v", p.Namespace, p.Name, alloc.Cards()[0], inv)
	}
	return dev
}

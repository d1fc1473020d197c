package inspect

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/probe"
)

const verifyNS = "gpushare-verify"

// probeLog is a container's log as gpushare-probe writes it, from probe.Run on sight with
// no driver (simulated cards).
func probeLog(t *testing.T, isolation gpushare.Isolation, expect int, s probe.Sight) string {
	t.Helper()
	r := probe.Run(probe.Config{Promise: isolation, Unit: gpushare.GiB, ExpectCards: expect}, s, func() (probe.Driver, error) {
		return nil, fmt.Errorf("%w: loading libcuda.so.1: not found", probe.ErrNoDriver)
	})
	line, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	return r.Line() + "\n" + line + "\n"
}

func simulatedGranted(uuid string) probe.Sight {
	return probe.Sight{VisibleDevices: uuid, VisibleSet: true, GrantUnits: 1, HasGrant: true}
}

// verifyCluster is a fake cluster whose probe pods run to completion on the node their
// affinity names (finish false: they stay Pending, unschedulable), and whose logs come from
// logs[node][container].
type verifyCluster struct {
	cs      *fake.Clientset
	logs    map[string]map[string]string
	created []*corev1.Pod
}

func newVerifyCluster(t *testing.T, finish bool, logs map[string]map[string]string, objs ...runtime.Object) *verifyCluster {
	t.Helper()
	v := &verifyCluster{cs: fake.NewClientset(objs...), logs: logs}
	v.cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		v.created = append(v.created, p.DeepCopy())
		if finish {
			p.Spec.NodeName = p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0].Values[0]
			p.Status.Phase = corev1.PodFailed
		} else {
			p.Status.Phase = corev1.PodPending
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
				Message: "0/3 nodes are available: 1 Insufficient aliyun.com/gpu-mem."}}
		}
		return false, nil, nil // the tracker stores the pod as changed
	})
	return v
}

func (v *verifyCluster) readLogs(ctx context.Context, ns, pod, container string) (string, error) {
	p, err := v.cs.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	log, ok := v.logs[p.Spec.NodeName][container]
	if !ok {
		return "", errors.New("container not found")
	}
	return log, nil
}

// run runs --verify on nodes; it returns the output, stderr and the error.
func (v *verifyCluster) run(ctx context.Context, t *testing.T, timeout time.Duration, nodes ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	flags := &flagpole{Verify: true, MemResource: string(gpushare.DefaultMemResource), CountResource: string(gpushare.DefaultCountResource)}
	r := verifyRun{Client: cluster{Client: v.cs, Namespace: verifyNS, Logs: v.readLogs}, Namespace: verifyNS, Image: "gpushare/share-plugin:test",
		Mem: gpushare.DefaultMemResource, ID: "abcde", Timeout: timeout, Interval: time.Millisecond}
	err := runVerify(ctx, flags, nodes, r, genericiooptions.IOStreams{Out: &out, ErrOut: &errOut})
	return out.String(), errOut.String(), err
}

// leftPods fails t when a probe pod is still there.
func (v *verifyCluster) leftPods(t *testing.T) {
	t.Helper()
	l, err := v.cs.CoreV1().Pods(verifyNS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range l.Items {
		t.Errorf("probe pod %s left behind", p.Name)
	}
}

const (
	verifyUUIDA = "GPU-0a0a0a0a-0000-0000-0000-000000000001"
	verifyUUIDB = "GPU-0b0b0b0b-0000-0000-0000-000000000002"
)

// verifyFixture: gpu-a (isolation none), gpu-b (asks mps, share-plugin enforces limit… here
// the labels say limit), a DRA node, a node without GPUs, and one whose label has a typo.
func verifyFixture(t *testing.T) []runtime.Object {
	t.Helper()
	dev := func(i int, uuid string) gpushare.Device {
		return gpushare.Device{Index: i, UUID: uuid, Model: "Tesla T4", MemoryMiB: 15360, Units: 15, Healthy: true}
	}
	return []runtime.Object{
		&makeNode("gpu-a", "").Sharing().Inventory(t, gpushare.GiB, dev(0, verifyUUIDA)).n,
		&makeNode("gpu-b", "").Sharing().Label(gpushare.LabelIsolation, "mps").Label(gpushare.LabelIsolationEnforced, "none").
			Inventory(t, gpushare.GiB, dev(0, verifyUUIDB)).n,
		&makeNode("dra-1", "").Label(gpushare.LabelBackend, string(gpushare.BackendDRA)).n,
		&makeNode("typo", "").Sharing().Label(gpushare.LabelIsolation, "MPS").n,
		&makeNode("cpu-1", "").n,
	}
}

// TestVerify: one pod per GPU-sharing node through the scheduler, both containers' results
// in the table, the pods deleted, the exit status from the worst verdict.
func TestVerify(t *testing.T) {
	tests := []struct {
		name     string
		sibling  probe.Sight // the sibling container on gpu-a
		wantCode int
	}{
		{name: "verify_simulated", sibling: probe.Sight{}, wantCode: exitCheckIncomplete},
		{name: "verify_not_enforced", sibling: probe.Sight{VisibleDevices: "all", VisibleSet: true}, wantCode: exitDisagreement},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logs := map[string]map[string]string{
				"gpu-a": {containerGranted: probeLog(t, gpushare.IsolationNone, 1, simulatedGranted(verifyUUIDA)), containerSibling: probeLog(t, gpushare.IsolationNone, 0, tc.sibling)},
				"gpu-b": {containerGranted: "gpushare-probe: unknown flag: --nope\n", containerSibling: probeLog(t, gpushare.IsolationNone, 0, probe.Sight{})},
			}
			v := newVerifyCluster(t, true, logs, verifyFixture(t)...)
			out, stderr, err := v.run(context.Background(), t, time.Minute)
			if got := ExitCode(err); got != tc.wantCode {
				t.Errorf("exit %d (%v), want %d", got, err, tc.wantCode)
			}
			checkGolden(t, tc.name, out)
			if stderr != "" {
				t.Errorf("stderr: %s", stderr)
			}
			if len(v.created) != 2 {
				t.Fatalf("%d pods created, want 2 (gpu-a, gpu-b)", len(v.created))
			}
			checkProbePod(t, v.created[0], "gpu-a", "--isolation=", "--isolation-enforced=", "--unit=GiB")
			checkProbePod(t, v.created[1], "gpu-b", "--isolation=mps", "--isolation-enforced=none")
			v.leftPods(t)
		})
	}
}

// checkProbePod: scheduled by affinity (no nodeName), one unit for the granted container,
// nothing for the sibling, the node's labels as flags.
func checkProbePod(t *testing.T, p *corev1.Pod, node string, args ...string) {
	t.Helper()
	if p.Spec.NodeName != "" || p.Spec.SchedulerName != "" {
		t.Errorf("pod %s: nodeName %q schedulerName %q, want the default scheduler to place it", p.Name, p.Spec.NodeName, p.Spec.SchedulerName)
	}
	if got := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0].Values; len(got) != 1 || got[0] != node {
		t.Errorf("pod %s: affinity to %v, want %s", p.Name, got, node)
	}
	if p.Labels[gpushare.LabelVerifyRun] != "abcde" || p.Namespace != verifyNS {
		t.Errorf("pod %s: labels %v namespace %s", p.Name, p.Labels, p.Namespace)
	}
	g, s := p.Spec.Containers[0], p.Spec.Containers[1]
	if q := g.Resources.Limits[gpushare.DefaultMemResource]; g.Name != containerGranted || q.Value() != 1 {
		t.Errorf("pod %s: granted container %s asks %v", p.Name, g.Name, g.Resources.Limits)
	}
	if s.Name != containerSibling || len(s.Resources.Limits)+len(s.Resources.Requests) != 0 {
		t.Errorf("pod %s: sibling container %s asks %v", p.Name, s.Name, s.Resources)
	}
	joined := strings.Join(g.Args, " ")
	for _, a := range append(args, "--expect-cards=1") {
		if !strings.Contains(joined, a) {
			t.Errorf("pod %s: granted args %q lack %q", p.Name, joined, a)
		}
	}
	if !strings.Contains(strings.Join(s.Args, " "), "--expect-cards=0") {
		t.Errorf("pod %s: sibling args %q", p.Name, s.Args)
	}
}

// TestVerifyTimeout: a pod the scheduler cannot place is cannot verify with its reason, and
// is deleted.
func TestVerifyTimeout(t *testing.T) {
	v := newVerifyCluster(t, false, nil, verifyFixture(t)...)
	out, _, err := v.run(context.Background(), t, 20*time.Millisecond, "gpu-a")
	if ExitCode(err) != exitCheckIncomplete {
		t.Errorf("exit %d (%v), want %d", ExitCode(err), err, exitCheckIncomplete)
	}
	checkGolden(t, "verify_timeout", out)
	v.leftPods(t)
}

// TestVerifyCleanup: the pods created are deleted when creating another fails and when the
// run is interrupted; a node that shares no GPU is an error before any pod.
func TestVerifyCleanup(t *testing.T) {
	t.Run("create fails", func(t *testing.T) {
		v := newVerifyCluster(t, true, nil, verifyFixture(t)...)
		v.cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if len(v.created) > 0 {
				return true, nil, errors.New("quota exceeded")
			}
			return false, nil, nil
		})
		_, _, err := v.run(context.Background(), t, time.Minute)
		if ExitCode(err) != exitCheckIncomplete || !strings.Contains(fmt.Sprint(err), "quota exceeded") {
			t.Errorf("err %v, want the create error with status 2", err)
		}
		v.leftPods(t)
	})
	t.Run("interrupted", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		v := newVerifyCluster(t, false, nil, verifyFixture(t)...)
		v.cs.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
			cancel() // Ctrl-C while waiting
			return false, nil, nil
		})
		_, _, err := v.run(ctx, t, time.Minute)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err %v, want context.Canceled", err)
		}
		if len(v.created) == 0 {
			t.Fatal("no pod created")
		}
		v.leftPods(t)
	})
	t.Run("not a GPU node", func(t *testing.T) {
		v := newVerifyCluster(t, true, nil, verifyFixture(t)...)
		_, _, err := v.run(context.Background(), t, time.Minute, "gpu-a", "cpu-1")
		if !errors.Is(err, errNotSharingNode) || ExitCode(err) != exitCheckIncomplete || len(v.created) != 0 {
			t.Errorf("err %v, %d pods created; want errNotSharingNode before any pod", err, len(v.created))
		}
	})
}

// TestDefaultProbeImage: the default image is the share-plugin image of the VERSION file.
func TestDefaultProbeImage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "gpushare/share-plugin:" + strings.TrimSpace(string(b)); defaultProbeImage != want {
		t.Errorf("defaultProbeImage = %s, want %s (VERSION)", defaultProbeImage, want)
	}
}

// TestVerifyCommand: --verify takes several NODEs, runs in the default namespace without -n,
// and refuses the flags of the other modes with status 2.
func TestVerifyCommand(t *testing.T) {
	r := runCommand(t, verifyFixture(t), "", nil, "--verify", "--verify-timeout=10ms", "gpu-a", "gpu-b")
	if ExitCode(r.err) != exitCheckIncomplete {
		t.Errorf("exit %d (%v), want %d:\n%s", ExitCode(r.err), r.err, exitCheckIncomplete, r.stdout)
	}
	count := func(prefix string) int {
		n := 0
		for _, s := range r.requests {
			if strings.HasPrefix(s, prefix) {
				n++
			}
		}
		return n
	}
	// describe prints a DELETE as "get pods NAME" (a delete action has a name too).
	if count("create pods") != 2 || count("list pods ns=default") == 0 || count("get pods gpushare-probe-") != 2 {
		t.Errorf("requests %v: want two pods created in default, listed, and both deleted by name", r.requests)
	}
	if !strings.Contains(r.stdout, "gpu-a") || !strings.Contains(r.stdout, "gpu-b") {
		t.Errorf("table lacks a node:\n%s", r.stdout)
	}
	for _, args := range [][]string{{"--verify", "-d"}, {"--verify", "--pending"}, {"--verify", "--verify-timeout=0s"}, {"--verify", "--probe-image="}} {
		if r := runCommand(t, verifyFixture(t), "", nil, args...); ExitCode(r.err) != exitCheckIncomplete {
			t.Errorf("%v: exit %d (%v), want %d", args, ExitCode(r.err), r.err, exitCheckIncomplete)
		}
	}
	if r := runCommand(t, verifyFixture(t), "", nil, "gpu-a", "gpu-b"); r.err == nil || !strings.Contains(r.err.Error(), "at most 1 arg") {
		t.Errorf("two NODEs without --verify: %v", r.err)
	}
}

// TestVerifyComputeShare: on an mps node whose every card with room holds compute shares the
// probe asks for one share step, or it could never be placed; where a card without shares
// has room, or on a node without mps, it asks none.
func TestVerifyComputeShare(t *testing.T) {
	mps := func() *nodeB {
		return makeNode("gpu-s", "").Sharing().Label(gpushare.LabelIsolation, "mps").Label(gpushare.LabelIsolationEnforced, "mps").
			Inventory(t, gpushare.GiB, card(0, 16, true), card(1, 16, true))
	}
	shared := func(name, card, share string) runtime.Object {
		return makePod("ml", name).Node("gpu-s").GPU(4, 0).Alloc(`{"0":{"`+card+`":4}}`).Annotate(gpushare.AnnotationComputeShare, "c0="+share).Obj()
	}
	tests := []struct {
		name string
		objs []runtime.Object
		want string // the probe pod's compute share annotation; "" none
	}{
		{"every card holds shares", []runtime.Object{mps().Obj(), shared("a", "0", "50"), shared("b", "1", "25")}, containerGranted + "=5"},
		{"a card without shares has room", []runtime.Object{mps().Obj(), shared("a", "0", "50"),
			makePod("ml", "m").Node("gpu-s").GPU(4, 0).Alloc(`{"0":{"1":4}}`).Obj()}, ""},
		{"an empty card", []runtime.Object{mps().Obj(), shared("a", "0", "50")}, ""},
		{"shares full", []runtime.Object{mps().Obj(), shared("a", "0", "100"), shared("b", "1", "100")}, ""},
		{"not mps", []runtime.Object{makeNode("gpu-s", "").Sharing().Inventory(t, gpushare.GiB, card(0, 16, true)).Obj(),
			shared("a", "0", "50")}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := newVerifyCluster(t, false, nil, tc.objs...)
			if _, _, err := v.run(context.Background(), t, 10*time.Millisecond, "gpu-s"); ExitCode(err) != exitCheckIncomplete {
				t.Errorf("exit %d (%v), want %d: the probe never ran", ExitCode(err), err, exitCheckIncomplete)
			}
			if len(v.created) != 1 {
				t.Fatalf("%d probe pods created, want 1", len(v.created))
			}
			if got := v.created[0].Annotations[gpushare.AnnotationComputeShare]; got != tc.want {
				t.Errorf("probe pod's %s = %q, want %q", gpushare.AnnotationComputeShare, got, tc.want)
			}
		})
	}
}

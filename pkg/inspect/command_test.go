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

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// result is what one command run produced.
type result struct {
	stdout, stderr string
	err            error
	requests       []string // API requests, "verb resource namespace fieldSelector"
}

// golden is the golden-file form of a run: the output, then warnings, the error line and
// the API requests (the fake clientset ignores field selectors, so the selectors the
// command sends are checked here).
func (r result) golden(ns string, args []string) string {
	var b strings.Builder
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	b.WriteString(strings.TrimSpace("$ kubectl inspect gpushare "+strings.Join(args, " ")) + "\n")
	b.WriteString(r.stdout)
	if r.stderr != "" {
		b.WriteString("[stderr]\n" + r.stderr)
	}
	if r.err != nil {
		b.WriteString("[error]\n" + r.err.Error() + "\n")
	}
	b.WriteString("[requests]\n" + strings.Join(r.requests, "\n") + "\n")
	return b.String()
}

// runCommand runs the command with args against a fake clientset holding objs. ns is the
// -n namespace; react, when set, is tried before the fake's own handling.
func runCommand(t *testing.T, objs []runtime.Object, ns string, react k8stesting.ReactionFunc, args ...string) result {
	t.Helper()
	return runOn(t, fake.NewClientset(objs...), ns, react, args...)
}

// runOn is runCommand on a clientset the test has prepared (proxy reactors).
func runOn(t *testing.T, cs *fake.Clientset, ns string, react k8stesting.ReactionFunc, args ...string) result {
	t.Helper()
	applyFieldSelectors(cs)
	var r result
	cs.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r.requests = append(r.requests, describe(a))
		return false, nil, nil
	})
	if react != nil {
		cs.PrependReactor("*", "*", react)
	}
	var out, errOut bytes.Buffer
	cmd := newCommand(genericiooptions.IOStreams{Out: &out, ErrOut: &errOut},
		func() (cluster, error) { return cluster{Client: cs, Namespace: ns}, nil })
	cmd.SetArgs(append([]string{}, args...)) // never nil: cobra would read os.Args
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r.err = cmd.ExecuteContext(ctx)
	r.stdout, r.stderr = out.String(), errOut.String()
	// Requests that react answers itself are not recorded (it runs first).
	return r
}

// applyFieldSelectors makes the fake filter pod and event LISTs by field selector as the
// API server does (the fake ignores them), so a wrong selector shows in the output.
func applyFieldSelectors(cs *fake.Clientset) {
	cs.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sel := a.(k8stesting.ListAction).GetListRestrictions().Fields
		obj, err := cs.Tracker().List(corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithKind("Pod"), a.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		l := obj.(*corev1.PodList)
		var keep []corev1.Pod
		for _, p := range l.Items {
			if sel.Matches(fields.Set{"spec.nodeName": p.Spec.NodeName, "status.phase": string(p.Status.Phase)}) {
				keep = append(keep, p)
			}
		}
		l.Items = keep
		return true, l, nil
	})
	cs.PrependReactor("list", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sel := a.(k8stesting.ListAction).GetListRestrictions().Fields
		obj, err := cs.Tracker().List(corev1.SchemeGroupVersion.WithResource("events"), corev1.SchemeGroupVersion.WithKind("Event"), a.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		l := obj.(*corev1.EventList)
		var keep []corev1.Event
		for _, e := range l.Items {
			if sel.Matches(fields.Set{"reason": e.Reason, "involvedObject.uid": string(e.InvolvedObject.UID)}) {
				keep = append(keep, e)
			}
		}
		l.Items = keep
		return true, l, nil
	})
}

func describe(a k8stesting.Action) string {
	ns := a.GetNamespace()
	if ns == "" {
		ns = "<all>"
	}
	switch a := a.(type) {
	case k8stesting.ListActionImpl:
		// The options as sent: the parsed restrictions would re-order the terms.
		return fmt.Sprintf("list %s ns=%s fields=%q", a.GetResource().Resource, ns, a.GetListOptions().FieldSelector)
	case k8stesting.GetAction:
		return fmt.Sprintf("get %s %s", a.GetResource().Resource, a.GetName())
	}
	return a.GetVerb() + " " + a.GetResource().Resource
}

// TestCommandGolden runs the command over the scenarios and compares everything it prints
// (and the requests it sends) with testdata/<name>.golden.
func TestCommandGolden(t *testing.T) {
	tests := []struct {
		name     string
		objs     func(*testing.T) []runtime.Object
		ns       string
		args     []string
		wantFail bool
		wantIs   error
	}{
		{name: "reference", objs: referenceScenario},
		{name: "reference_details", objs: referenceScenario, args: []string{"-d"}},
		{name: "reference_json", objs: referenceScenario, args: []string{"-o", "json"}},
		{name: "reference_yaml", objs: referenceScenario, args: []string{"-o", "yaml"}},
		{name: "dra", objs: draScenario},
		{name: "dra_details", objs: draScenario, args: []string{"-d"}},
		{name: "dra_json", objs: draScenario, args: []string{"-o", "json"}},
		{name: "dra_one_node", objs: draScenario, args: []string{"gpu-dra"}},
		{name: "heterogeneous", objs: heterogeneousScenario},
		{name: "heterogeneous_details", objs: heterogeneousScenario, args: []string{"-d"}},
		{name: "card_choice_details", objs: cardChoiceScenario, args: []string{"-d"}},
		{name: "multi_card_container", objs: multiScenario},
		{name: "multi_card_container_details", objs: multiScenario, args: []string{"-d"}},
		{name: "mem_limit", objs: limitScenario},
		{name: "mem_limit_details", objs: limitScenario, args: []string{"-d"}},
		{name: "mem_limit_json", objs: limitScenario, args: []string{"-o", "json"}},
		{name: "compute_share", objs: computeScenario},
		{name: "compute_share_details", objs: computeScenario, args: []string{"-d"}},
		{name: "compute_share_json", objs: computeScenario, args: []string{"-o", "json"}},
		{name: "unhealthy_pending", objs: unhealthyPendingScenario},
		{name: "unhealthy_pending_details", objs: unhealthyPendingScenario, args: []string{"-d"}},
		{name: "unhealthy_pending_json", objs: unhealthyPendingScenario, args: []string{"-o", "json"}},
		{name: "usage", objs: usageScenario},
		{name: "usage_details", objs: usageScenario, args: []string{"-d"}},
		{name: "usage_json", objs: usageScenario, args: []string{"-o", "json"}},
		{name: "preflight", objs: preflightScenario},
		{name: "preflight_details", objs: preflightScenario, args: []string{"-d"}},
		{name: "preflight_json", objs: preflightScenario, args: []string{"-o", "json"}},
		{name: "mib_unit", objs: mibScenario},
		{name: "mixed_units", objs: mixedScenario},
		{name: "mixed_units_details", objs: mixedScenario, args: []string{"-d"}},
		{name: "one_node", objs: heterogeneousScenario, args: []string{"gpu-b"}},
		{name: "one_node_details", objs: heterogeneousScenario, args: []string{"gpu-a", "-d"}},
		{name: "pending", objs: pendingScenario, args: []string{"--pending"}},
		{name: "pending_namespace", objs: pendingScenario, ns: "ml", args: []string{"--pending"}},
		{name: "pending_json", objs: pendingScenario, args: []string{"--pending", "-o", "json"}},
		{name: "pending_none", objs: referenceScenario, args: []string{"--pending"}},
		{name: "malformed_annotations", objs: func(t *testing.T) []runtime.Object {
			// A broken inventory falls back to allocatable (2 cards of 8); a broken pod
			// annotation counts the pod's request as pending. Both are warned about.
			return []runtime.Object{
				makeNode("gpu-x", "10.0.0.9").Allocatable(16, 2).Annotate(gpushare.AnnotationNodeInventory, "{not json").Obj(),
				makePod("default", "garbled").Node("gpu-x").GPU(3, 0).Alloc("[1,2]").Obj(),
				makePod("default", "stale").Node("gpu-x").GPU(2, 0).Alloc(`{"0":{"5":2}}`).Obj(),
			}
		}},
		{name: "labelled_without_gpus", objs: func(t *testing.T) []runtime.Object {
			// cgpu=true but share-plugin has not published anything yet: a row of 0/0 and a
			// warning, next to a working node.
			return append(referenceScenario(t), makeNode("gpu-new", "10.0.0.10").Sharing().Obj())
		}},
		{name: "error_unknown_node", objs: referenceScenario, args: []string{"gpu-zz"}, wantFail: true},
		{name: "error_not_sharing_node", objs: referenceScenario, args: []string{"cpu-1"}, wantFail: true, wantIs: errNotSharingNode},
		{name: "error_no_sharing_nodes", objs: func(*testing.T) []runtime.Object {
			return []runtime.Object{makeNode("cpu-1", "192.168.0.80").Obj(), makePod("default", "web").Node("cpu-1").Obj()}
		}, wantFail: true, wantIs: errNoSharingNodes},
		{name: "error_bad_output", objs: referenceScenario, args: []string{"-o", "wide"}, wantFail: true},
		{name: "error_pending_with_node", objs: referenceScenario, args: []string{"--pending", "gpu-a"}, wantFail: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runCommand(t, tc.objs(t), tc.ns, nil, tc.args...)
			if (r.err != nil) != tc.wantFail {
				t.Fatalf("err = %v, want failure %v", r.err, tc.wantFail)
			}
			if tc.wantIs != nil && !errors.Is(r.err, tc.wantIs) {
				t.Errorf("err = %v, want errors.Is %v", r.err, tc.wantIs)
			}
			checkGolden(t, tc.name, r.golden(tc.ns, tc.args))
		})
	}
}

// TestCommandAPIErrors checks that API failures become one clear line naming the cause.
func TestCommandAPIErrors(t *testing.T) {
	gr := schema.GroupResource{Resource: "nodes"}
	tests := []struct {
		name    string
		err     error
		want    string
		wantAPI func(error) bool
	}{
		{
			name:    "forbidden",
			err:     apierrors.NewForbidden(gr, "", errors.New(`User "bob" cannot list resource "nodes"`)),
			want:    `permission denied (need get/list on nodes, pods and events): listing nodes: nodes is forbidden: User "bob" cannot list resource "nodes"`,
			wantAPI: apierrors.IsForbidden,
		},
		{
			name:    "unauthorized",
			err:     apierrors.NewUnauthorized("token expired"),
			want:    "not authenticated to the cluster (check the kubeconfig credentials): listing nodes: token expired",
			wantAPI: apierrors.IsUnauthorized,
		},
		{
			name: "multi-line server error",
			err:  errors.New("the server said:\n  something odd"),
			want: "listing nodes: the server said: something odd",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fail := func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetVerb() == "list" && a.GetResource().Resource == "nodes" {
					return true, nil, tc.err
				}
				return false, nil, nil
			}
			r := runCommand(t, referenceScenario(t), "", fail)
			if r.err == nil {
				t.Fatal("no error")
			}
			if diff := cmp.Diff(tc.want, r.err.Error()); diff != "" {
				t.Errorf("error line (-want,+got):\n%s", diff)
			}
			if tc.wantAPI != nil && !tc.wantAPI(r.err) {
				t.Errorf("error %v lost its API status", r.err)
			}
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing", r.stdout)
			}
		})
	}
}

// TestCommandConnectionErrors: a missing cluster configuration and an unreachable API server
// each give one line naming the cause (through the real ConfigFlags).
func TestCommandConnectionErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	unreachable := filepath.Join(dir, "unreachable")
	files := map[string]string{
		empty: "",
		// Port 1 on loopback refuses connections at once.
		unreachable: `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`,
	}
	for path, body := range files {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name       string
		kubeconfig string
		wantPrefix string
	}{
		{name: "no configuration", kubeconfig: empty, wantPrefix: "no cluster configured (set --kubeconfig, KUBECONFIG or --server): "},
		{name: "unreachable", kubeconfig: unreachable, wantPrefix: "cannot reach the cluster: listing nodes: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			cmd := NewCommand(genericiooptions.IOStreams{Out: &out, ErrOut: &errOut})
			cmd.SetArgs([]string{"--kubeconfig", tc.kubeconfig, "--request-timeout", "5s"})
			err := cmd.ExecuteContext(context.Background())
			if err == nil || !strings.HasPrefix(err.Error(), tc.wantPrefix) {
				t.Fatalf("err = %v, want it to start with %q", err, tc.wantPrefix)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans several lines: %q", err)
			}
			if out.Len() != 0 {
				t.Errorf("stdout = %q, want nothing", out.String())
			}
		})
	}
}

// TestPodListSelectors: every pod LIST carries the non-terminated (or unscheduled) field
// selector, per node when there are few sharing nodes and once for the cluster when there
// are many.
func TestPodListSelectors(t *testing.T) {
	many := func(n int) []runtime.Object {
		var objs []runtime.Object
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("gpu-%02d", i)
			objs = append(objs, makeNode(name, "").Allocatable(16, 1).Obj(),
				makePod("default", "p-"+name).Node(name).GPU(4, 0).Index("0").Obj())
		}
		return objs
	}
	tests := []struct {
		name string
		objs []runtime.Object
		args []string
		want []string
	}{
		{
			name: "few nodes: one list per node",
			objs: many(2),
			want: []string{
				`list nodes ns=<all> fields=""`,
				`list pods ns=<all> fields="spec.nodeName=gpu-00,status.phase!=Succeeded,status.phase!=Failed"`,
				`list pods ns=<all> fields="spec.nodeName=gpu-01,status.phase!=Succeeded,status.phase!=Failed"`,
			},
		},
		{
			name: "many nodes: one cluster-wide list",
			objs: many(perNodeListMax + 1),
			want: []string{
				`list nodes ns=<all> fields=""`,
				`list pods ns=<all> fields="status.phase!=Succeeded,status.phase!=Failed"`,
			},
		},
		{
			name: "one node named",
			objs: many(perNodeListMax + 1),
			args: []string{"gpu-03"},
			want: []string{
				`get nodes gpu-03`,
				`list pods ns=<all> fields="spec.nodeName=gpu-03,status.phase!=Succeeded,status.phase!=Failed"`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runCommand(t, tc.objs, "", nil, tc.args...)
			if r.err != nil {
				t.Fatal(r.err)
			}
			if diff := cmp.Diff(tc.want, r.requests); diff != "" {
				t.Errorf("requests (-want,+got):\n%s", diff)
			}
			if !strings.Contains(r.stdout, "Allocated/Total GPU Memory In Cluster:\n") {
				t.Errorf("no cluster line in:\n%s", r.stdout)
			}
		})
	}
}

// TestCardChoiceOnlyInDetails: card annotations show in the details view only; every other
// output is the same as without them.
func TestCardChoiceOnlyInDetails(t *testing.T) {
	for _, args := range [][]string{nil, {"-o", "json"}, {"-o", "yaml"}, {"gpu-a"}} {
		t.Run(strings.Join(append([]string{"args"}, args...), " "), func(t *testing.T) {
			with := runCommand(t, cardChoiceScenario(t), "", nil, args...)
			without := runCommand(t, heterogeneousScenario(t), "", nil, args...)
			if with.err != nil || without.err != nil {
				t.Fatalf("errors: %v, %v", with.err, without.err)
			}
			if d := cmp.Diff(without.stdout, with.stdout); d != "" {
				t.Errorf("output changed by card annotations (-without,+with):\n%s", d)
			}
		})
	}
	d := runCommand(t, cardChoiceScenario(t), "", nil, "-d")
	if !strings.Contains(d.stdout, "CARD CHOICE:") {
		t.Errorf("details view lacks CARD CHOICE:\n%s", d.stdout)
	}
}

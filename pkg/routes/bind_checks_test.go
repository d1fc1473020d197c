package routes_test

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/metrics"
	"github.com/gpushare/gpushare/pkg/routes"
)

// TestBindChecksTheRequest: bind binds only what the scheduler it serves could have asked
// for: the UID it placed, a pod of a scheduler name it serves, a pod requesting gpu-mem
// (unless configured otherwise), on a node its filter passes. Each refusal writes nothing,
// holds no card and is counted under its reason.
func TestBindChecksTheRequest(t *testing.T) {
	ofScheduler := func(name, scheduler string, mem int64) *corev1.Pod {
		p := ct.Pod(name, mem)
		p.Spec.SchedulerName = scheduler
		return p
	}
	args := func(pod, node string) extenderv1.ExtenderBindingArgs {
		return extenderv1.ExtenderBindingArgs{PodName: pod, PodNamespace: "default", PodUID: types.UID("uid-" + pod), Node: node}
	}
	tests := []struct {
		name     string
		config   func(*routes.Config)
		args     extenderv1.ExtenderBindingArgs
		wantCode int    // HTTP status
		wantErr  string // the whole error, "" for a bind that succeeds
		label    string // gpushare_bind_failures_total reason counted once
		binding  string // "pod->node" created; "" for none
	}{
		{
			name:     "no pod UID",
			args:     extenderv1.ExtenderBindingArgs{PodName: "p", PodNamespace: "default", Node: "n1"},
			wantCode: http.StatusBadRequest, label: metrics.BindNoUID,
			wantErr: "bind request needs podUID, the UID of the pod the scheduler placed",
		},
		{
			name:     "pod name no API server accepts",
			args:     extenderv1.ExtenderBindingArgs{PodName: "../p", PodNamespace: "default", PodUID: "u", Node: "n1"},
			wantCode: http.StatusBadRequest, label: metrics.BindBadRequest,
			wantErr: "bind request: podName is not a valid name: a lowercase RFC 1123 subdomain must consist of lower case " +
				"alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character " +
				"(e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
		},
		{
			name: "pod of another scheduler", args: args("volcano", "n1"),
			wantCode: http.StatusOK, label: metrics.BindSchedulerName,
			wantErr: `pod default/volcano has schedulerName "volcano"; this extender binds only pods of default-scheduler`,
		},
		{
			// An empty schedulerName is what the API server defaults to default-scheduler.
			name:   "default-scheduler pod when serving another scheduler only",
			config: func(c *routes.Config) { c.SchedulerNames = []string{"gpu-scheduler"} },
			args:   args("p", "n1"), wantCode: http.StatusOK, label: metrics.BindSchedulerName,
			wantErr: `pod default/p has schedulerName "default-scheduler"; this extender binds only pods of gpu-scheduler`,
		},
		{
			name:   "pod of a second served scheduler",
			config: func(c *routes.Config) { c.SchedulerNames = []string{"default-scheduler", "volcano"} },
			args:   args("volcano", "n1"), wantCode: http.StatusOK, binding: "volcano->n1",
		},
		{
			name: "explicit default-scheduler", args: args("named", "n1"), wantCode: http.StatusOK, binding: "named->n1",
		},
		{
			name: "pod without gpu-mem", args: args("cpu", "n1"),
			wantCode: http.StatusOK, label: metrics.BindNotGPU,
			wantErr: "pod default/cpu requests no aliyun.com/gpu-mem; this extender binds only pods that do " +
				"(a scheduler configuration without managedResources sends it every pod: see --bind-non-gpu-pods)",
		},
		{
			// Filter passes a pod without gpu-mem on every node, gpushare or not.
			name:   "pod without gpu-mem, allowed, to a node the cache does not know",
			config: func(c *routes.Config) { c.BindNonGPUPods = true },
			args:   args("cpu", "plain-node"), wantCode: http.StatusOK, binding: "cpu->plain-node",
		},
		{
			name: "node the extender does not know", args: args("p", "n9"),
			wantCode: http.StatusOK, label: metrics.BindNodeUnfit,
			wantErr: "binding pod default/p to n9: not a gpushare node (no cgpu=true label or no gpu-mem)",
		},
		{
			name: "gpushare node without cards", args: args("p", "bare"),
			wantCode: http.StatusOK, label: metrics.BindNodeUnfit,
			wantErr: "binding pod default/p to bare: not a gpushare node (no cgpu=true label or no gpu-mem)",
		},
		{
			name: "node whose inventory is out of range", args: args("p", "huge-card"),
			wantCode: http.StatusOK, label: metrics.BindNodeUnfit,
			wantErr: "binding pod default/p to huge-card: node's GPU inventory is out of range, it takes no GPU pod until fixed: " +
				"annotation gpushare.io/gpu-inventory: card 0 units 9000000000000000000 out of range 0..4294967296",
		},
		{
			// Filter's reason for the same node: 20 > 16.
			name: "node whose cards are too small", args: args("huge", "n1"),
			wantCode: http.StatusOK, label: metrics.BindNoFit,
			wantErr: "choosing cards for pod default/huge on n1: gpu-mem: need 20 on one card; largest free 16 (card0 16/16)",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mod := func(*routes.Config) {}
			if tc.config != nil {
				mod = tc.config
			}
			f := newFixtureConfig(t, mod, ct.Node("n1", 16), ct.BareNode("bare"), ct.Node("huge-card", 9_000_000_000_000_000_000),
				ct.Pod("p", 6), ct.Pod("huge", 20), ct.Pod("cpu", 0),
				ofScheduler("volcano", "volcano", 6), ofScheduler("named", "default-scheduler", 6))
			rec := f.do(t, http.MethodPost, "/gpushare-scheduler/bind", tc.args)
			var got struct{ Error string }
			decodeInto(t, rec, &got)
			if rec.Code != tc.wantCode || got.Error != tc.wantErr {
				t.Fatalf("HTTP %d, error %q\nwant HTTP %d, error %q", rec.Code, got.Error, tc.wantCode, tc.wantErr)
			}
			if tc.label != "" {
				if n := f.counter(t, "gpushare_bind_failures_total", tc.label); n != 1 {
					t.Errorf("gpushare_bind_failures_total{reason=%q} = %g, want 1", tc.label, n)
				}
			}
			var want []string
			if tc.binding != "" {
				want = []string{tc.binding}
			}
			if d := cmp.Diff(want, bindingsCreated(f)); d != "" {
				t.Errorf("bindings (-want,+got):\n%s", d)
			}
			if tc.binding == "" {
				if got := summary(f, "n1"); got != "0:0/16" {
					t.Errorf("cards after refused bind %q, want 0:0/16", got)
				}
			}
		})
	}
}

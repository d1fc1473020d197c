package routes_test

import (
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/routes"
)

// After a restart the node LIST can finish long before the pod LIST: a card held 16/16 then
// reads 0/16. No verb may answer from that half-built ledger.
func TestVerbsWaitForPodSync(t *testing.T) {
	release := make(chan struct{})
	env := ct.StartWithSlowPods(t, release,
		ct.Node("n1", 16),
		ct.Placed(ct.Pod("holder", 16), "n1", gpushare.CardUnits{0: 16}),
		ct.Pod("new", 16),
	)
	f := handlerOn(t, env, "binpack", func(*routes.Config) {}) // no Binding may happen: bind must answer 503
	ct.Eventually(t, "node n1 in the cache while pods are still being listed", func() bool {
		_, ok := env.Cache.InspectNode("n1")
		return ok
	})
	names := []string{"n1"}
	args := extenderv1.ExtenderArgs{Pod: ct.Pod("new", 16), NodeNames: &names}
	bind := extenderv1.ExtenderBindingArgs{PodName: "new", PodNamespace: "default", PodUID: "uid-new", Node: "n1"}
	calls := []struct {
		method, path string
		body         any
	}{
		{http.MethodPost, "/gpushare-scheduler/filter", args},
		{http.MethodPost, "/gpushare-scheduler/prioritize", args},
		{http.MethodPost, "/gpushare-scheduler/bind", bind},
		{http.MethodGet, "/gpushare-scheduler/inspect", nil},
		{http.MethodGet, "/gpushare-scheduler/inspect/n1", nil},
		{http.MethodGet, "/readyz", nil},
	}
	for _, c := range calls {
		rec := f.do(t, c.method, c.path, c.body)
		if rec.Code != http.StatusServiceUnavailable {
			t.Errorf("%s before the pod LIST: HTTP %d %s, want 503", c.path, rec.Code, rec.Body)
			continue
		}
		if c.path == "/readyz" {
			continue
		}
		var e struct{ Error string }
		decodeInto(t, rec, &e)
		if !strings.Contains(e.Error, "not synced") || rec.Header().Get("Retry-After") == "" {
			t.Errorf("%s: error %q, Retry-After %q; want the not-synced error and a Retry-After", c.path, e.Error, rec.Header().Get("Retry-After"))
		}
	}
	if pod, err := env.Client.CoreV1().Pods("default").Get(t.Context(), "new", metav1.GetOptions{}); err != nil || pod.Spec.NodeName != "" {
		t.Fatalf("pod bound before the cache synced: node %q, err %v", pod.Spec.NodeName, err)
	}

	close(release)
	ct.Eventually(t, "cache ready", env.Cache.Ready)
	rec := f.do(t, http.MethodPost, "/gpushare-scheduler/filter", args)
	var got extenderv1.ExtenderFilterResult
	decodeInto(t, rec, &got)
	if rec.Code != http.StatusOK || got.NodeNames == nil || len(*got.NodeNames) != 0 {
		t.Fatalf("filter after sync: HTTP %d, passed %v; want n1 rejected (card 0 has 0 of 16 free)", rec.Code, got.NodeNames)
	}
	if want := "gpu-mem: need 16 on one card; largest free 0 (card0 0/16)"; got.FailedNodes["n1"] != want {
		t.Errorf("n1 reason %q, want %q", got.FailedNodes["n1"], want)
	}
}

package routes_test

import (
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/routes"
)

// leadership is a routes.Leadership switched by the test.
type leadership struct {
	leading atomic.Bool
	leader  string
	// loseAfter > 0: leading answers false from the loseAfter+1-th check on, as when the
	// lease is lost while a request is being served.
	loseAfter, checks atomic.Int32
	// left is what BeginWrite leaves a write (0: the default, a full lease).
	left     time.Duration
	inflight atomic.Int32 // writes begun and not done
}

func (l *leadership) Leading() bool {
	n := l.checks.Add(1)
	if lose := l.loseAfter.Load(); lose > 0 && n > lose {
		return false
	}
	return l.leading.Load()
}

func (l *leadership) Leader() string { return l.leader }

func (l *leadership) BeginWrite() (time.Duration, func(), error) {
	if !l.Leading() {
		return 0, nil, errors.New("not the leader")
	}
	left := l.left
	switch {
	case left == 0:
		left = 15 * time.Second
	case left < 0:
		return 0, nil, errors.New("the lease ends too soon")
	}
	l.inflight.Add(1)
	return left, func() { l.inflight.Add(-1) }, nil
}

var _ routes.Leadership = (*leadership)(nil)

// A follower keeps a synced cache and is ready, but answers no scheduler verb (the Service
// reaches the leader by its pod label); once it leads it serves them.
func TestFollowerRefusesVerbs(t *testing.T) {
	lead := &leadership{leader: "cp-1_3f2a"}
	f := newFixtureConfig(t, func(c *routes.Config) { c.Leadership = lead },
		ct.Node("n1", 16), ct.Pod("new", 4))
	ct.Eventually(t, "cache ready", f.Cache.Ready)
	names := []string{"n1"}
	args := extenderv1.ExtenderArgs{Pod: ct.Pod("new", 4), NodeNames: &names}
	bind := extenderv1.ExtenderBindingArgs{PodName: "new", PodNamespace: "default", PodUID: "uid-new", Node: "n1"}
	verbs := []struct {
		path string
		body any
	}{
		{"/gpushare-scheduler/filter", args},
		{"/gpushare-scheduler/prioritize", args},
		{"/gpushare-scheduler/bind", bind},
	}

	for _, v := range verbs {
		rec := f.do(t, http.MethodPost, v.path, v.body)
		var e struct{ Error string }
		decodeInto(t, rec, &e)
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" ||
			e.Error != "gpushare extender is not the leader; the leader is cp-1_3f2a" {
			t.Errorf("follower %s: HTTP %d, Retry-After %q, error %q; want 503, a Retry-After and the leader named",
				v.path, rec.Code, rec.Header().Get("Retry-After"), e.Error)
		}
	}
	// A synced follower is ready (drains and rollouts count it); the Service reaches the
	// leader by its pod label.
	if rec := f.do(t, http.MethodGet, "/readyz", nil); rec.Code != http.StatusOK {
		t.Errorf("follower /readyz: HTTP %d %q, want 200", rec.Code, rec.Body)
	}
	if got := f.counter(t, "gpushare_requests_not_leader_total", "bind"); got != 1 {
		t.Errorf("gpushare_requests_not_leader_total{verb=bind} = %v, want 1", got)
	}
	// Diagnostics stay served: people and monitoring read a follower's warm ledger.
	for _, path := range []string{"/healthz", "/gpushare-scheduler/inspect/n1"} {
		if rec := f.do(t, http.MethodGet, path, nil); rec.Code != http.StatusOK {
			t.Errorf("follower %s: HTTP %d %s, want 200", path, rec.Code, rec.Body)
		}
	}
	if pod, err := f.Client.CoreV1().Pods("default").Get(t.Context(), "new", metav1.GetOptions{}); err != nil || pod.Spec.NodeName != "" {
		t.Fatalf("a follower bound the pod: node %q, err %v", pod.Spec.NodeName, err)
	}

	lead.leading.Store(true)
	for _, v := range verbs {
		if rec := f.do(t, http.MethodPost, v.path, v.body); rec.Code != http.StatusOK {
			t.Errorf("leader %s: HTTP %d %s, want 200", v.path, rec.Code, rec.Body)
		}
	}
	if rec := f.do(t, http.MethodGet, "/readyz", nil); rec.Code != http.StatusOK {
		t.Errorf("leader /readyz: HTTP %d %s, want 200", rec.Code, rec.Body)
	}
	if pod, err := f.Client.CoreV1().Pods("default").Get(t.Context(), "new", metav1.GetOptions{}); err != nil || pod.Spec.NodeName != "n1" {
		t.Fatalf("leader's bind: pod on node %q, err %v; want n1", pod.Spec.NodeName, err)
	}
}

// A replica whose lease is lost refuses at once, and says so when the new leader is unknown.
func TestLostLeadershipRefusesAtOnce(t *testing.T) {
	lead := &leadership{}
	lead.leading.Store(true)
	f := newFixtureConfig(t, func(c *routes.Config) { c.Leadership = lead }, ct.Node("n1", 16))
	ct.Eventually(t, "cache ready", f.Cache.Ready)
	names := []string{"n1"}
	args := extenderv1.ExtenderArgs{Pod: ct.Pod("p", 4), NodeNames: &names}
	if rec := f.do(t, http.MethodPost, "/gpushare-scheduler/filter", args); rec.Code != http.StatusOK {
		t.Fatalf("leader filter: HTTP %d %s", rec.Code, rec.Body)
	}
	lead.leading.Store(false)
	rec := f.do(t, http.MethodPost, "/gpushare-scheduler/filter", args)
	var e struct{ Error string }
	decodeInto(t, rec, &e)
	if rec.Code != http.StatusServiceUnavailable || e.Error != "gpushare extender is not the leader; the leader is not known yet" {
		t.Errorf("after losing the lease: HTTP %d, error %q; want 503 not the leader, not known yet", rec.Code, e.Error)
	}
}

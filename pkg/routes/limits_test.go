package routes_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
	"github.com/gpushare/gpushare/pkg/routes"
)

const (
	filterPath     = "/gpushare-scheduler/filter"
	prioritizePath = "/gpushare-scheduler/prioritize"
	bindPath       = "/gpushare-scheduler/bind"
)

// errorOf decodes a {"error": "..."} answer.
func errorOf(t testing.TB, rec *httptest.ResponseRecorder) string {
	t.Helper()
	var e struct{ Error string }
	decodeInto(t, rec, &e)
	return e.Error
}

func filterBody(t testing.TB, nodes ...string) []byte {
	t.Helper()
	b, err := json.Marshal(extenderv1.ExtenderArgs{Pod: ct.Pod("p", 6), NodeNames: &nodes})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// unreadable fails the test when the handler reads the body.
type unreadable struct{ t testing.TB }

func (u unreadable) Read([]byte) (int, error) {
	u.t.Error("the handler read a body whose Content-Length exceeds the cap")
	return 0, io.EOF
}

// TestBodyCap: a body over MaxRequestBytes is answered 400 with a JSON error, whether it
// says so in its Content-Length (then it is not read at all) or only turns out larger.
func TestBodyCap(t *testing.T) {
	f := newFixtureConfig(t, func(c *routes.Config) {}, ct.Node("n1", 16), ct.Pod("p", 6))
	small := newFixtureConfig(t, func(c *routes.Config) { c.MaxRequestBytes = 100 }, ct.Node("n1", 16), ct.Pod("p", 6))
	tests := []struct {
		name    string
		f       *fixture
		path    string
		body    io.Reader
		length  int64 // Content-Length announced
		wantErr string
	}{
		{name: "filter announces 64 MiB", f: f, path: filterPath, body: unreadable{t}, length: 64 << 20,
			wantErr: "request body exceeds 4194304 bytes"},
		{name: "bind announces 4 MiB + 1", f: f, path: bindPath, body: unreadable{t}, length: 4<<20 + 1,
			wantErr: "request body exceeds 4194304 bytes"},
		{name: "filter body larger than announced", f: small, path: filterPath,
			body: bytes.NewReader(filterBody(t, "n1")), length: 50, wantErr: "request body exceeds 100 bytes"},
		{name: "filter body over the cap, length unknown", f: small, path: filterPath,
			body: bytes.NewReader(filterBody(t, "n1")), length: -1, wantErr: "request body exceeds 100 bytes"},
		{name: "prioritize over the cap", f: small, path: prioritizePath,
			body: bytes.NewReader(filterBody(t, "n1")), length: -1, wantErr: "request body exceeds 100 bytes"},
		{name: "bind over the cap", f: small, path: bindPath,
			body: strings.NewReader(`{"PodName":"` + strings.Repeat("p", 100) + `","PodNamespace":"default","PodUID":"u","Node":"n1"}`), length: -1,
			wantErr: "request body exceeds 100 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, tc.path, tc.body)
			req.ContentLength = tc.length
			rec := httptest.NewRecorder()
			tc.f.h.Verbs().ServeHTTP(rec, req)
			if got := errorOf(t, rec); rec.Code != http.StatusBadRequest || got != tc.wantErr {
				t.Errorf("HTTP %d, error %q; want 400, %q", rec.Code, got, tc.wantErr)
			}
		})
	}
}

// TestSlowBodyAllocatesWhatArrives: a client that announces a large body and sends it
// slowly costs the extender what it sent, not what it announced. The heap is measured
// while the handler waits for the rest of the body.
func TestSlowBodyAllocatesWhatArrives(t *testing.T) {
	f := newFixture(t, ct.Node("n1", 16), ct.Pod("p", 6))
	body := filterBody(t, "n1")
	tests := []struct {
		name     string
		length   int64
		wantCode int
	}{
		// Over the cap: refused before a byte is read.
		{name: "announces 64 MiB", length: 64 << 20, wantCode: http.StatusBadRequest},
		// At the cap: read as it arrives (the rest of the announced bytes never come; the
		// body ends early, which the decoder accepts as the whole document).
		{name: "announces the 4 MiB cap", length: routes.DefaultMaxRequestBytes, wantCode: http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pr, pw := io.Pipe()
			req := httptest.NewRequest(http.MethodPost, filterPath, pr)
			req.ContentLength = tc.length
			rec := httptest.NewRecorder()
			var before, during runtime.MemStats
			runtime.ReadMemStats(&before)
			done := make(chan struct{})
			go func() {
				defer close(done)
				f.h.Verbs().ServeHTTP(rec, req)
			}()
			if tc.wantCode == http.StatusBadRequest {
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					pw.Close()
					t.Fatal("the handler waits for a body over the cap")
				}
			} else {
				// Write returns once the handler has read the first bytes: it is now waiting
				// for more, with whatever it allocated for the body.
				if _, err := pw.Write(body[:10]); err != nil {
					t.Fatal(err)
				}
			}
			runtime.ReadMemStats(&during)
			if n := during.TotalAlloc - before.TotalAlloc; n > 1<<20 {
				t.Errorf("%d bytes allocated while the body is awaited, want at most 1 MiB", n)
			}
			if tc.wantCode == http.StatusOK {
				if _, err := pw.Write(body[10:]); err != nil {
					t.Fatal(err)
				}
				pw.Close()
				<-done
			}
			if rec.Code != tc.wantCode {
				t.Errorf("HTTP %d %s, want %d", rec.Code, rec.Body, tc.wantCode)
			}
		})
	}
}

// TestInflightCap: beyond MaxInflight requests being served, verbs are answered 429 with a
// JSON error and Retry-After, counted by verb; health is still served; a freed slot serves
// again.
func TestInflightCap(t *testing.T) {
	f := newFixtureConfig(t, func(c *routes.Config) { c.MaxInflight = 1 }, ct.Node("n1", 16), ct.Pod("p", 6))
	body := filterBody(t, "n1")
	pr, pw := io.Pipe()
	first := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.h.Verbs().ServeHTTP(first, httptest.NewRequest(http.MethodPost, filterPath, pr))
	}()
	if _, err := pw.Write(body[:10]); err != nil { // the first request now holds the slot
		t.Fatal(err)
	}
	for _, c := range []struct{ method, path, verb string }{
		{http.MethodPost, filterPath, "filter"},
		{http.MethodPost, prioritizePath, "prioritize"},
		{http.MethodPost, bindPath, "bind"},
		{http.MethodGet, "/gpushare-scheduler/inspect", "inspect"},
	} {
		rec := f.do(t, c.method, c.path, body)
		want := "gpushare extender is serving 1 requests, its limit; retry shortly"
		if got := errorOf(t, rec); rec.Code != http.StatusTooManyRequests || got != want || rec.Header().Get("Retry-After") != "1" {
			t.Errorf("%s while full: HTTP %d, error %q, Retry-After %q; want 429, %q, 1",
				c.path, rec.Code, got, rec.Header().Get("Retry-After"), want)
		}
		if n := f.counter(t, "gpushare_requests_throttled_total", c.verb); n != 1 {
			t.Errorf("gpushare_requests_throttled_total{verb=%q} = %g, want 1", c.verb, n)
		}
	}
	if rec := f.do(t, http.MethodGet, "/healthz", nil); rec.Code != http.StatusOK {
		t.Errorf("/healthz while full: HTTP %d", rec.Code)
	}
	if _, err := pw.Write(body[10:]); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	<-done
	if first.Code != http.StatusOK {
		t.Fatalf("first request: HTTP %d %s", first.Code, first.Body)
	}
	if rec := f.do(t, http.MethodPost, filterPath, body); rec.Code != http.StatusOK {
		t.Errorf("after the slot is freed: HTTP %d %s", rec.Code, rec.Body)
	}
}

// TestNodeCap: a filter or prioritize call listing more than MaxNodesPerRequest nodes is
// answered 400, as NodeNames or as full Nodes.
func TestNodeCap(t *testing.T) {
	f := newFixtureConfig(t, func(c *routes.Config) { c.MaxNodesPerRequest = 2 }, ct.Node("n1", 16), ct.Pod("p", 6))
	withNodes := func(names ...string) extenderv1.ExtenderArgs {
		list := &corev1.NodeList{}
		for _, n := range names {
			list.Items = append(list.Items, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
		return extenderv1.ExtenderArgs{Pod: ct.Pod("p", 6), Nodes: list}
	}
	const tooMany = "request lists more than 2 nodes, the most one call may name"
	tests := []struct {
		name     string
		path     string
		body     any
		wantCode int
		wantErr  string
	}{
		{name: "filter at the cap", path: filterPath, body: filterBody(t, "n1", "n2"), wantCode: http.StatusOK},
		{name: "filter over the cap", path: filterPath, body: filterBody(t, "n1", "n2", "n3"), wantCode: http.StatusBadRequest, wantErr: tooMany},
		{name: "filter over the cap, escaped names", path: filterPath,
			body: []byte(`{"Pod":{},"NodeNames":["\u006e1","n2","n3"]}`), wantCode: http.StatusBadRequest, wantErr: tooMany},
		{name: "prioritize over the cap", path: prioritizePath, body: filterBody(t, "n1", "n2", "n3"), wantCode: http.StatusBadRequest, wantErr: tooMany},
		{name: "full nodes at the cap", path: filterPath, body: withNodes("n1", "n2"), wantCode: http.StatusOK},
		{name: "full nodes over the cap", path: filterPath, body: withNodes("n1", "n2", "n3"), wantCode: http.StatusBadRequest, wantErr: tooMany},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := f.do(t, http.MethodPost, tc.path, tc.body)
			if rec.Code != tc.wantCode {
				t.Fatalf("HTTP %d %s, want %d", rec.Code, rec.Body, tc.wantCode)
			}
			if tc.wantErr != "" {
				if got := errorOf(t, rec); got != tc.wantErr {
					t.Errorf("error %q, want %q", got, tc.wantErr)
				}
			}
		})
	}
}

// TestBindPodGetsRateLimited: binds of pods the informer does not hold read them from the
// API server at most at the configured rate; beyond it they fail at once with a clear error
// and no read. Pods the informer holds cost no read and are not limited.
func TestBindPodGetsRateLimited(t *testing.T) {
	f := newFixtureConfig(t, func(c *routes.Config) { c.PodGetQPS, c.PodGetBurst = 1e-6, 2 },
		ct.Node("n1", 16), ct.Pod("p", 6))
	var got []string
	for i := range 4 {
		name := fmt.Sprintf("ghost-%d", i)
		res := f.bind(t, extenderv1.ExtenderBindingArgs{PodName: name, PodNamespace: "default", PodUID: types.UID("uid-" + name), Node: "n1"})
		got = append(got, res.Error)
	}
	limited := "not in the extender's pod cache, and reading such pods from the API server is over its rate limit (1e-06/s, burst 2); retry shortly"
	want := []string{
		`looking up pod default/ghost-0: pods "ghost-0" not found`,
		`looking up pod default/ghost-1: pods "ghost-1" not found`,
		"looking up pod default/ghost-2: " + limited,
		"looking up pod default/ghost-3: " + limited,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("bind errors (-want,+got):\n%s", d)
	}
	if res := f.bind(t, extenderv1.ExtenderBindingArgs{PodName: "p", PodNamespace: "default", PodUID: "uid-p", Node: "n1"}); res.Error != "" {
		t.Errorf("bind of a pod the informer holds, past the rate: %s", res.Error)
	}
	gets := 0
	for _, a := range f.Client.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "pods" {
			gets++
		}
	}
	if gets != 2 {
		t.Errorf("%d API reads of pods, want 2 (the burst)", gets)
	}
}

// TestNewServer: the server carries the timeouts; a write timeout that bind's worst case
// (Binding write plus read-back, 30 s each) would outlast is refused, as is any timeout
// that is not positive.
func TestNewServer(t *testing.T) {
	def := routes.DefaultTimeouts()
	tests := []struct {
		name    string
		mod     func(*routes.Timeouts)
		wantErr string
	}{
		{name: "defaults"},
		{name: "write timeout too short", mod: func(t *routes.Timeouts) { t.Write = time.Minute },
			wantErr: "http server: write timeout 1m0s must exceed 1m0s: a bind's Binding write and its read-back take up to 30s each"},
		{name: "no read timeout", mod: func(t *routes.Timeouts) { t.Read = 0 },
			wantErr: "http server: read timeout 0s must be positive"},
		{name: "negative idle timeout", mod: func(t *routes.Timeouts) { t.Idle = -time.Second },
			wantErr: "http server: idle timeout -1s must be positive"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			to := def
			if tc.mod != nil {
				tc.mod(&to)
			}
			srv, err := routes.NewServer("127.0.0.1:0", http.NotFoundHandler(), to)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := routes.Timeouts{ReadHeader: srv.ReadHeaderTimeout, Read: srv.ReadTimeout, Write: srv.WriteTimeout, Idle: srv.IdleTimeout}
			if got != to || srv.Addr != "127.0.0.1:0" {
				t.Errorf("server %s with %+v, want 127.0.0.1:0 with %+v", srv.Addr, got, to)
			}
		})
	}
}

// TestNewValidatesLimits: negative limits and empty scheduler names are configuration
// errors.
func TestNewValidatesLimits(t *testing.T) {
	tests := []struct {
		name    string
		mod     func(*routes.Config)
		wantErr string
	}{
		{"negative node cap", func(c *routes.Config) { c.MaxNodesPerRequest = -1 }, "routes config: max nodes per request -1 is negative"},
		{"negative in-flight cap", func(c *routes.Config) { c.MaxInflight = -1 }, "routes config: max in-flight requests -1 is negative"},
		{"negative pod GET rate", func(c *routes.Config) { c.PodGetQPS = -1 }, "routes config: pod GET rate -1/s, burst 0: negative"},
		{"empty scheduler name", func(c *routes.Config) { c.SchedulerNames = []string{"default-scheduler", ""} }, "routes config: empty scheduler name"},
	}
	env := ct.Start(t, time.Minute)
	pol, err := policy.New("binpack")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := routes.Config{Cache: env.Cache, Policy: pol, Resources: gpushare.DefaultResources(), Client: env.Client}
			tc.mod(&cfg)
			_, err := routes.New(cfg)
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

package routes_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/gpushare"
)

func TestInspect(t *testing.T) {
	f := newFixture(t,
		ct.Node("n1", 16, 8),
		ct.Placed(ct.Pod("a", 6), "n1", gpushare.CardUnits{0: 6}),
		ct.Placed(ct.Pod("b", 8), "n1", gpushare.CardUnits{1: 8}),
		ct.Node("n2", 4),
	)
	const n1 = `{"name":"n1","totalGPU":24,"usedGPU":14,"devs":[` +
		`{"id":0,"totalGPU":16,"usedGPU":6,"uuid":"GPU-n1-0","model":"Tesla T4","healthy":true,"pods":[{"name":"a","namespace":"default","uid":"uid-a","usedGPU":6,"reserved":false}]},` +
		`{"id":1,"totalGPU":8,"usedGPU":8,"uuid":"GPU-n1-1","model":"Tesla T4","healthy":true,"pods":[{"name":"b","namespace":"default","uid":"uid-b","usedGPU":8,"reserved":false}]}]}`
	const n2 = `{"name":"n2","totalGPU":4,"usedGPU":0,"devs":[{"id":0,"totalGPU":4,"usedGPU":0,"uuid":"GPU-n2-0","model":"Tesla T4","healthy":true,"pods":[]}]}`
	tests := []struct {
		name, path string
		wantCode   int
		wantBody   string
	}{
		{"all", "/gpushare-scheduler/inspect", http.StatusOK, `{"nodes":[` + n1 + `,` + n2 + `]}`},
		{"one node", "/gpushare-scheduler/inspect/n2", http.StatusOK, `{"nodes":[` + n2 + `]}`},
		{"unknown node", "/gpushare-scheduler/inspect/nope", http.StatusNotFound, `{"error":"node \"nope\" is not a gpushare node"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := f.do(t, http.MethodGet, tc.path, nil)
			if rec.Code != tc.wantCode {
				t.Errorf("status %d, want %d", rec.Code, tc.wantCode)
			}
			if d := cmp.Diff(tc.wantBody, strings.TrimSpace(rec.Body.String())); d != "" {
				t.Errorf("body (-want,+got):\n%s", d)
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	f := newFixtureWith(t, 1024, ct.Node("n1", 16))
	big := []byte(`{"Pod":{},"NodeNames":["` + strings.Repeat("x", 2000) + `"]}`)
	tests := []struct {
		name, method, path string
		body               []byte
		wantCode           int
		wantError          string
	}{
		{"malformed filter", http.MethodPost, "/gpushare-scheduler/filter", []byte(`{"Pod":`), http.StatusBadRequest, "decoding request body: unexpected end of JSON input"},
		{"oversized filter", http.MethodPost, "/gpushare-scheduler/filter", big, http.StatusBadRequest, "request body exceeds 1024 bytes"},
		{"filter without pod", http.MethodPost, "/gpushare-scheduler/filter", []byte(`{"NodeNames":["n1"]}`), http.StatusBadRequest, "request has no pod"},
		{"filter without nodes", http.MethodPost, "/gpushare-scheduler/filter", []byte(`{"Pod":{}}`), http.StatusBadRequest, "request has neither nodenames nor nodes"},
		{"malformed prioritize", http.MethodPost, "/gpushare-scheduler/prioritize", []byte(`[`), http.StatusBadRequest, "decoding request body: unexpected end of JSON input"},
		{"wrong type bind", http.MethodPost, "/gpushare-scheduler/bind", []byte(`{"PodName":3}`), http.StatusBadRequest,
			"decoding request body: json: cannot unmarshal number into Go struct field ExtenderBindingArgs.PodName of type string"},
		{"malformed bind", http.MethodPost, "/gpushare-scheduler/bind", []byte(`{"PodName":"p"`), http.StatusBadRequest, "decoding request body: unexpected EOF"},
		{"incomplete bind", http.MethodPost, "/gpushare-scheduler/bind", []byte(`{"PodName":"p"}`), http.StatusBadRequest, "bind request needs podName, podNamespace and node"},
		{"GET filter", http.MethodGet, "/gpushare-scheduler/filter", nil, http.StatusMethodNotAllowed, "method not allowed"},
		{"PUT bind", http.MethodPut, "/gpushare-scheduler/bind", nil, http.StatusMethodNotAllowed, "method not allowed"},
		{"POST inspect", http.MethodPost, "/gpushare-scheduler/inspect", nil, http.StatusMethodNotAllowed, "method not allowed"},
		{"unknown path", http.MethodGet, "/gpushare-scheduler/nope", nil, http.StatusNotFound, "no route for /gpushare-scheduler/nope"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := f.do(t, tc.method, tc.path, tc.body)
			if rec.Code != tc.wantCode {
				t.Errorf("status %d, want %d (%s)", rec.Code, tc.wantCode, rec.Body)
			}
			var got struct{ Error string }
			decodeInto(t, rec, &got)
			if got.Error != tc.wantError {
				t.Errorf("error %q, want %q", got.Error, tc.wantError)
			}
			if ctype := rec.Header().Get("Content-Type"); ctype != "application/json" {
				t.Errorf("Content-Type %q", ctype)
			}
		})
	}
}

func TestHealthAndMetrics(t *testing.T) {
	f := newFixture(t, ct.Node("n1", 16, 8), ct.Placed(ct.Pod("a", 6), "n1", gpushare.CardUnits{1: 6}))
	for path, want := range map[string]string{"/healthz": "ok\n", "/readyz": "ok\n", "/version": "test-version\n"} {
		rec := f.do(t, http.MethodGet, path, nil)
		if rec.Code != http.StatusOK || rec.Body.String() != want {
			t.Errorf("GET %s = %d %q, want 200 %q", path, rec.Code, rec.Body, want)
		}
	}
	// one rejection of each kind, then scrape
	names := []string{"n1", "unknown"}
	f.do(t, http.MethodPost, "/gpushare-scheduler/filter", map[string]any{"Pod": ct.Pod("p", 17), "NodeNames": names})
	rec := f.do(t, http.MethodGet, "/metrics", nil)
	body := rec.Body.String()
	for _, want := range []string{
		`gpushare_card_allocated_units{card="1",node="n1"} 6`,
		`gpushare_card_total_units{card="0",node="n1"} 16`,
		`gpushare_card_total_units{card="1",node="n1"} 8`,
		`gpushare_filter_rejections_total{reason="card_shortfall"} 1`,
		`gpushare_filter_rejections_total{reason="unknown_node"} 1`,
		`gpushare_filter_rejections_total{reason="invalid_request"} 0`,
		`gpushare_filter_duration_seconds_count 1`,
		`gpushare_bind_failures_total{reason="binding"} 0`,
		`gpushare_prioritize_duration_seconds_count 0`,
		`gpushare_bind_duration_seconds_count 0`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
}

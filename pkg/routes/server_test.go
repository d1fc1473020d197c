package routes_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
)

// The verbs and the diagnostics are served on separate listeners: neither handler set
// answers the other's paths, so a port opened to monitoring never reaches /bind.
func TestHandlerSetsAreDisjoint(t *testing.T) {
	f := newFixture(t, ct.Node("n1", 16))
	tests := []struct {
		name         string
		handler      http.Handler
		method, path string
		wantCode     int
	}{
		{"verbs serve filter", f.h.Verbs(), http.MethodPost, "/gpushare-scheduler/filter", http.StatusBadRequest},
		{"verbs serve bind", f.h.Verbs(), http.MethodPost, "/gpushare-scheduler/bind", http.StatusBadRequest},
		{"verbs serve prioritize", f.h.Verbs(), http.MethodPost, "/gpushare-scheduler/prioritize", http.StatusBadRequest},
		{"verbs lack metrics", f.h.Verbs(), http.MethodGet, "/metrics", http.StatusNotFound},
		{"verbs lack healthz", f.h.Verbs(), http.MethodGet, "/healthz", http.StatusNotFound},
		{"verbs lack readyz", f.h.Verbs(), http.MethodGet, "/readyz", http.StatusNotFound},
		{"verbs lack version", f.h.Verbs(), http.MethodGet, "/version", http.StatusNotFound},
		{"verbs lack inspect", f.h.Verbs(), http.MethodGet, "/gpushare-scheduler/inspect", http.StatusNotFound},
		{"diagnostics serve metrics", f.h.Diagnostics(), http.MethodGet, "/metrics", http.StatusOK},
		{"diagnostics serve healthz", f.h.Diagnostics(), http.MethodGet, "/healthz", http.StatusOK},
		{"diagnostics serve inspect", f.h.Diagnostics(), http.MethodGet, "/gpushare-scheduler/inspect", http.StatusOK},
		{"diagnostics lack bind", f.h.Diagnostics(), http.MethodPost, "/gpushare-scheduler/bind", http.StatusNotFound},
		{"diagnostics lack filter", f.h.Diagnostics(), http.MethodPost, "/gpushare-scheduler/filter", http.StatusNotFound},
		{"diagnostics lack prioritize", f.h.Diagnostics(), http.MethodPost, "/gpushare-scheduler/prioritize", http.StatusNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			tc.handler.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, strings.NewReader("")))
			if rec.Code != tc.wantCode {
				t.Errorf("%s %s = %d %s, want %d", tc.method, tc.path, rec.Code, rec.Body, tc.wantCode)
			}
		})
	}
}

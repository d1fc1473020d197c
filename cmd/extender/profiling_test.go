package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// With --profiling the pprof index answers and every other path still reaches the extender.
func TestWithProfiling(t *testing.T) {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("extender " + r.URL.Path))
	})
	h := withProfiling(next)
	tests := []struct {
		path, want string
	}{
		{"/debug/pprof/", "goroutine"},
		{"/debug/pprof/cmdline", ""},
		{"/gpushare-scheduler/filter", "extender /gpushare-scheduler/filter"},
		{"/healthz", "extender /healthz"},
	}
	for _, tc := range tests {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), tc.want) {
			t.Errorf("GET %s: %d %.80q, want 200 containing %q", tc.path, rec.Code, rec.Body.String(), tc.want)
		}
	}
}

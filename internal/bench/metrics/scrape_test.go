package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestGet(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    string
		wantErr string
	}{
		{"text format", http.StatusOK, exposition(1, 2, 3, 4, 0.01), ""},
		{"HTTP error", http.StatusServiceUnavailable, "", "HTTP 503"},
		{"not an exposition", http.StatusOK, "x{ 1\n", "parsing metrics"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !strings.HasPrefix(r.Header.Get("Accept"), "text/plain") {
					t.Errorf("Accept %q, want the text format", r.Header.Get("Accept"))
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			s, err := Get(context.Background(), srv.Client(), srv.URL)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Hist[FilterSeconds].Count; got != 4 {
				t.Errorf("filter count %g, want 4", got)
			}
		})
	}
}

package metrics

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestNewClient(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.pem")
	tests := []struct {
		name    string
		files   TLSFiles
		wantTLS bool
		wantErr string
	}{
		{name: "no files: plain defaults"},
		{name: "missing CA", files: TLSFiles{CAFile: missing}, wantErr: "loading the extender's client TLS files"},
		{name: "missing certificate", files: TLSFiles{CertFile: missing, KeyFile: missing}, wantErr: "loading the extender's client TLS files"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewClient(time.Second, tc.files)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want it to mention %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Timeout != time.Second || c.Transport.(*http.Transport).TLSClientConfig != nil {
				t.Errorf("client %+v, want a 1s timeout and no TLS settings", c)
			}
		})
	}
}

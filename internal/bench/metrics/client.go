package metrics

import (
	"fmt"
	"net/http"
	"time"

	"k8s.io/client-go/transport"
)

// TLSFiles name the client certificate, its key and the CA that a scraper uses against the
// extender's diagnostics listener (mutual TLS); all empty means plain defaults.
type TLSFiles struct {
	CertFile, KeyFile, CAFile string
}

// NewClient is an HTTP client with timeout that presents files' client certificate and
// trusts files' CA. Errors: a file that cannot be read or parsed, a key without certificate.
func NewClient(timeout time.Duration, files TLSFiles) (*http.Client, error) {
	cfg, err := transport.TLSConfigFor(&transport.Config{TLS: transport.TLSConfig{
		CertFile: files.CertFile, KeyFile: files.KeyFile, CAFile: files.CAFile,
	}})
	if err != nil {
		return nil, fmt.Errorf("loading the extender's client TLS files: %w", err)
	}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{TLSClientConfig: cfg, Proxy: http.ProxyFromEnvironment}}, nil
}

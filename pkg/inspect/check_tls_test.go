package inspect

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// --check reads an extender whose diagnostics listener asks for mutual TLS when given the
// client certificate and CA, and reports it not checked without them.
func TestCheckExtenderMutualTLS(t *testing.T) {
	dir := t.TempDir()
	caKey, caCert, caPEM := testCertificate(t, nil, nil, "test-ca", 0)
	_, _, clientPEM := testCertificate(t, caCert, caKey, "gpushare-admin", x509.ExtKeyUsageClientAuth)
	writeFile(t, filepath.Join(dir, "ca.crt"), caPEM)
	writeFile(t, filepath.Join(dir, "client.pem"), clientPEM) // certificate and key in one file

	body, err := json.Marshal(agreeingExtender())
	if err != nil {
		t.Fatal(err)
	}
	ext := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != gpushare.InspectPath {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(body)
	}))
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	ext.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12}
	ext.StartTLS()
	t.Cleanup(ext.Close)
	// The extender's serving certificate is httptest's own; trust exactly it.
	writeFile(t, filepath.Join(dir, "server-ca.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ext.Certificate().Raw}))
	plugin := serveJSON(t, pluginServedPath, agreeingPlugin())

	base := []string{"--check", "--extender-url", ext.URL, "--share-plugin-urls", plugin.URL}
	withCA := append(append([]string{}, base...), "--extender-ca", filepath.Join(dir, "server-ca.crt"))
	withCert := append(append([]string{}, withCA...),
		"--extender-client-cert", filepath.Join(dir, "client.pem"), "--extender-client-key", filepath.Join(dir, "client.pem"))
	tests := []struct {
		name       string
		args       []string
		wantOut    string // substring of stdout
		wantErr    string
		wantCode   int
		wantNoCode bool
	}{
		{name: "client certificate and CA: read", args: withCert, wantOut: "ok: 1 nodes, 2 cards, 2 pods agree\n", wantNoCode: true},
		{name: "no client certificate: refused, exit 2", args: withCA, wantOut: "extender: not checked (",
			wantErr: "check incomplete", wantCode: 2},
		{name: "certificate without key", args: append(append([]string{}, withCA...), "--extender-client-cert", filepath.Join(dir, "client.pem")),
			wantErr: "--extender-client-cert and --extender-client-key go together", wantCode: 2},
		{name: "TLS files without --extender-url", args: []string{"--check", "--extender-ca", filepath.Join(dir, "ca.crt")},
			wantErr: "apply to --extender-url only", wantCode: 2},
		{name: "unreadable CA", args: append(append([]string{}, base...), "--extender-ca", filepath.Join(dir, "missing.crt")),
			wantErr: "loading --extender-client-cert, --extender-client-key, --extender-ca", wantCode: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runOn(t, fake.NewClientset(checkObjects(t)...), "", nil, tc.args...)
			if !strings.Contains(r.stdout, tc.wantOut) {
				t.Errorf("stdout %q, want it to contain %q", r.stdout, tc.wantOut)
			}
			if tc.wantNoCode {
				if r.err != nil {
					t.Fatalf("error %v, want none", r.err)
				}
				return
			}
			if r.err == nil || !strings.Contains(r.err.Error(), tc.wantErr) || ExitCode(r.err) != tc.wantCode {
				t.Fatalf("error %v, want exit %d mentioning %q", r.err, tc.wantCode, tc.wantErr)
			}
		})
	}
}

// testCertificate makes a CA (parent nil) or a leaf for usage signed by parent, and returns
// its key, certificate and PEM (a leaf's PEM holds its key too).
func testCertificate(t *testing.T, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, cn string, usage x509.ExtKeyUsage) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		parent, parentKey = tmpl, key
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if !cert.IsCA {
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})...)
	}
	return key, cert, out
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

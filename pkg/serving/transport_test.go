package serving_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/serving"
)

// okHandler answers "ok <path>" to anything.
var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	fmt.Fprintf(w, "ok %s", r.URL.Path)
})

// serve runs a listener of a TLS transport over p's files on 127.0.0.1 and returns its
// base URL; everything stops with the test.
func serve(t *testing.T, p *pki, auth serving.ClientAuth, anonymous ...string) string {
	t.Helper()
	return serveWith(t, p, auth, func(tr *serving.Transport) http.Handler { return tr.Authenticate(okHandler, anonymous...) })
}

// serveWith is serve with the handler handler builds on the transport.
func serveWith(t *testing.T, p *pki, auth serving.ClientAuth, handler func(*serving.Transport) http.Handler) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tr, err := serving.New(serving.Options{BindAddress: "127.0.0.1", CertFile: p.certFile, KeyFile: p.keyFile, ClientCAFile: p.ca,
		ClientAllowedNames: []string{serving.DefaultClientAllowedName, "spiffe://cluster.local/ns/kube-system/sa/kube-scheduler", "scheduler.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tr.Listen(ctx, 0, auth)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler(tr), ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{}, 2)
	go func() { tr.Run(ctx); done <- struct{}{} }()
	go func() { _ = srv.Serve(ln); done <- struct{}{} }()
	t.Cleanup(func() {
		cancel()
		_ = srv.Close()
		<-done
		<-done
	})
	return "https://" + ln.Addr().String()
}

// client trusts p's serving CA and presents certs; each request makes a new connection,
// so each sees the certificates the server holds at that moment.
func client(p *pki, certs ...tls.Certificate) *http.Client {
	roots := x509.NewCertPool()
	roots.AddCert(p.serverCA.cert)
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if len(certs) > 0 {
		// Send the certificate whatever CAs the server names as acceptable (Go's default
		// client would withhold one the server does not name), as a hostile client would.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &certs[0], nil }
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: cfg}}
}

// get returns the status and body, or the transport error.
func get(c *http.Client, url string) (int, string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// isTLSRefusal: the server ended the handshake over the client's certificate (TLS 1.3
// reports it as an alert on the first read, TLS 1.2 during the handshake).
func isTLSRefusal(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "tls: ") || errors.Is(err, io.EOF) ||
		strings.Contains(err.Error(), "connection reset"))
}

func TestVerbsListenerRequiresClientCert(t *testing.T) {
	p := newPKI(t)
	base := serve(t, p, serving.RequireClientCert)
	other := newCA(t, "other-ca")
	servingAsClient, err := tls.X509KeyPair(p.serverCert, p.serverKey)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		certs   []tls.Certificate
		wantErr bool
	}{
		{name: "no certificate refused at the handshake", wantErr: true},
		{name: "certificate of another CA refused at the handshake", certs: []tls.Certificate{other.clientCert(t, "kube-scheduler")}, wantErr: true},
		// The serving certificate chains to a CA the extender does not trust for clients
		// and is not a client certificate.
		{name: "the serving certificate refused", certs: []tls.Certificate{servingAsClient}, wantErr: true},
		{name: "certificate of the client CA accepted", certs: []tls.Certificate{p.clientCA.clientCert(t, "kube-scheduler")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body, err := get(client(p, tc.certs...), base+"/gpushare-scheduler/bind")
			if tc.wantErr {
				if !isTLSRefusal(err) {
					t.Fatalf("got HTTP %d %q, err %v; want the TLS handshake refused", code, body, err)
				}
				return
			}
			if err != nil || code != http.StatusOK || body != "ok /gpushare-scheduler/bind" {
				t.Fatalf("got HTTP %d %q, err %v; want 200 from the handler", code, body, err)
			}
		})
	}
}

// The diagnostics listener lets kubelet's probes (no certificate) reach /healthz and
// /readyz and nothing else; a certificate it does not trust ends the handshake.
func TestDiagnosticsListenerAuth(t *testing.T) {
	p := newPKI(t)
	base := serve(t, p, serving.VerifyClientCertIfGiven, "/healthz", "/readyz")
	valid := p.clientCA.clientCert(t, "prometheus")
	other := newCA(t, "other-ca").clientCert(t, "prometheus")
	tests := []struct {
		name     string
		certs    []tls.Certificate
		path     string
		wantCode int
		wantBody string
		wantErr  bool
	}{
		{name: "probe healthz without certificate", path: "/healthz", wantCode: 200, wantBody: "ok /healthz"},
		{name: "probe readyz without certificate", path: "/readyz", wantCode: 200, wantBody: "ok /readyz"},
		{name: "metrics without certificate", path: "/metrics", wantCode: 401,
			wantBody: `{"error":"/metrics needs a client certificate signed by the extender's client CA"}` + "\n"},
		{name: "inspect without certificate", path: "/gpushare-scheduler/inspect", wantCode: 401,
			wantBody: `{"error":"/gpushare-scheduler/inspect needs a client certificate signed by the extender's client CA"}` + "\n"},
		{name: "pprof without certificate", path: "/debug/pprof/", wantCode: 401,
			wantBody: `{"error":"/debug/pprof/ needs a client certificate signed by the extender's client CA"}` + "\n"},
		{name: "a path only prefixed by a probe's", path: "/healthzz", wantCode: 401,
			wantBody: `{"error":"/healthzz needs a client certificate signed by the extender's client CA"}` + "\n"},
		{name: "metrics with certificate", certs: []tls.Certificate{valid}, path: "/metrics", wantCode: 200, wantBody: "ok /metrics"},
		{name: "inspect with certificate", certs: []tls.Certificate{valid}, path: "/gpushare-scheduler/inspect", wantCode: 200,
			wantBody: "ok /gpushare-scheduler/inspect"},
		{name: "healthz with certificate of another CA", certs: []tls.Certificate{other}, path: "/healthz", wantErr: true},
		{name: "metrics with certificate of another CA", certs: []tls.Certificate{other}, path: "/metrics", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body, err := get(client(p, tc.certs...), base+tc.path)
			if tc.wantErr {
				if !isTLSRefusal(err) {
					t.Fatalf("got HTTP %d %q, err %v; want the TLS handshake refused", code, body, err)
				}
				return
			}
			if err != nil || code != tc.wantCode || body != tc.wantBody {
				t.Fatalf("got HTTP %d %q, err %v; want %d %q", code, body, err, tc.wantCode, tc.wantBody)
			}
		})
	}
}

// Rewriting the certificate files changes what the running listener serves and trusts,
// without a restart.
func TestCertificateFilesReloaded(t *testing.T) {
	p := newPKI(t)
	base := serve(t, p, serving.RequireClientCert)
	oldClient := p.clientCA.clientCert(t, "kube-scheduler")
	if _, _, err := get(client(p, oldClient), base+"/"); err != nil {
		t.Fatalf("before rotation: %v", err)
	}

	p.rotateServing(t)
	want := pemSerial(t, p.serverCert)
	eventually(t, "the rotated serving certificate served", func() bool {
		return servedSerial(t, p, oldClient, base) == want
	})

	newCA := newCA(t, "client-ca-2")
	write(t, p.ca, newCA.pem)
	newClient := newCA.clientCert(t, "kube-scheduler")
	eventually(t, "a client of the new client CA accepted", func() bool {
		_, _, err := get(client(p, newClient), base+"/")
		return err == nil
	})
	if code, body, err := get(client(p, oldClient), base+"/"); !isTLSRefusal(err) {
		t.Fatalf("client of the replaced CA: HTTP %d %q, err %v; want the handshake refused", code, body, err)
	}
}

// A file that stops loading keeps the last good certificate in use.
func TestBrokenRotationKeepsServing(t *testing.T) {
	p := newPKI(t)
	base := serve(t, p, serving.RequireClientCert)
	c := p.clientCA.clientCert(t, "kube-scheduler")
	want := pemSerial(t, p.serverCert)
	refusals := captureKlog(t)
	write(t, p.certFile, []byte("not a certificate"))
	// The watcher reports each failed load; only once it has, the listener's serial says
	// what the broken file did.
	eventually(t, "the broken certificate file's load failure reported", func() bool {
		return strings.Contains(refusals.String(), "failed to find any PEM data")
	})
	if got := servedSerial(t, p, c, base); got != want {
		t.Fatalf("served serial %s after a broken write, want the last good %s", got, want)
	}
}

// captureKlog sends klog's output to a buffer until the test ends (klog guards both
// settings with its own lock).
func captureKlog(t *testing.T) *syncBuffer {
	t.Helper()
	b := &syncBuffer{}
	klog.LogToStderr(false)
	klog.SetOutput(b)
	t.Cleanup(func() {
		klog.Flush()
		klog.LogToStderr(true)
	})
	return b
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func pemSerial(t *testing.T, certPEM []byte) string {
	t.Helper()
	b, _ := pem.Decode(certPEM)
	if b == nil {
		t.Fatal("no PEM block")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.SerialNumber.String()
}

// servedSerial is the serial of the certificate the listener presents now.
func servedSerial(t *testing.T, p *pki, cert tls.Certificate, base string) string {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(p.serverCA.cert)
	conn, err := tls.Dial("tcp", strings.TrimPrefix(base, "https://"), &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}})
	if err != nil {
		return "dial: " + err.Error()
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestNewErrors(t *testing.T) {
	p := newPKI(t)
	otherCert, _ := p.serverCA.issue(t, "other", x509.ExtKeyUsageServerAuth)
	mismatched := filepath.Join(p.dir, "other.crt")
	write(t, mismatched, otherCert)
	garbage := filepath.Join(p.dir, "garbage.pem")
	write(t, garbage, []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	missing := filepath.Join(p.dir, "missing.pem")
	allow := []string{serving.DefaultClientAllowedName}
	tests := []struct {
		name    string
		opts    serving.Options
		wantErr string
	}{
		{"no transport", serving.Options{}, "no transport"},
		{"missing certificate", serving.Options{ClientAllowedNames: allow, CertFile: missing, KeyFile: p.keyFile, ClientCAFile: p.ca}, "loading the serving certificate"},
		{"key of another certificate", serving.Options{ClientAllowedNames: allow, CertFile: mismatched, KeyFile: p.keyFile, ClientCAFile: p.ca}, "loading the serving certificate"},
		{"missing client CA", serving.Options{ClientAllowedNames: allow, CertFile: p.certFile, KeyFile: p.keyFile, ClientCAFile: missing}, "loading the client CA"},
		{"client CA not PEM certificates", serving.Options{ClientAllowedNames: allow, CertFile: p.certFile, KeyFile: p.keyFile, ClientCAFile: garbage}, "loading the client CA"},
		{"empty client CA", serving.Options{ClientAllowedNames: allow, CertFile: p.certFile, KeyFile: p.keyFile, ClientCAFile: os.DevNull}, "loading the client CA"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := serving.New(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want it to mention %q", err, tc.wantErr)
			}
		})
	}
}

// Plain HTTP binds loopback unless an address is given, and authenticates no one.
func TestInsecureListensOnLoopback(t *testing.T) {
	tests := []struct {
		name     string
		bind     string
		wantHost string
	}{
		{"default", "", "127.0.0.1"},
		{"explicit", "127.0.0.1", "127.0.0.1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := serving.New(serving.Options{Insecure: true, BindAddress: tc.bind})
			if err != nil {
				t.Fatal(err)
			}
			ln, err := tr.Listen(t.Context(), 0, serving.RequireClientCert)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			host, _, err := net.SplitHostPort(ln.Addr().String())
			if err != nil || host != tc.wantHost {
				t.Fatalf("listening on %s (%v), want host %s", ln.Addr(), err, tc.wantHost)
			}
			srv := &http.Server{Handler: tr.Authenticate(okHandler, "/healthz"), ReadHeaderTimeout: 5 * time.Second}
			go func() { _ = srv.Serve(ln) }()
			defer srv.Close()
			code, body, err := get(http.DefaultClient, "http://"+ln.Addr().String()+"/gpushare-scheduler/bind")
			if err != nil || code != http.StatusOK || body != "ok /gpushare-scheduler/bind" {
				t.Fatalf("plain HTTP: %d %q %v; want the handler's answer", code, body, err)
			}
		})
	}
}

func TestOptions(t *testing.T) {
	names := []string{serving.DefaultClientAllowedName}
	withTLS := serving.Options{CertFile: "/c", KeyFile: "/k", ClientCAFile: "/ca", ClientAllowedNames: names}
	tests := []struct {
		name     string
		opts     serving.Options
		wantHost string
		wantErr  string
	}{
		{name: "nothing", opts: serving.Options{}, wantErr: "no transport: give --tls-cert-file, --tls-private-key-file and --client-ca-file"},
		{name: "tls binds every interface", opts: withTLS, wantHost: "0.0.0.0"},
		{name: "insecure binds loopback", opts: serving.Options{Insecure: true}, wantHost: "127.0.0.1"},
		{name: "insecure on every interface only when asked", opts: serving.Options{Insecure: true, BindAddress: "0.0.0.0"}, wantHost: "0.0.0.0"},
		{name: "tls on one address", opts: serving.Options{CertFile: "/c", KeyFile: "/k", ClientCAFile: "/ca", ClientAllowedNames: names, BindAddress: "10.0.0.1"}, wantHost: "10.0.0.1"},
		{name: "tls without a client name", opts: serving.Options{CertFile: "/c", KeyFile: "/k", ClientCAFile: "/ca"},
			wantErr: `--client-allowed-names "": name at least one client certificate`},
		{name: "tls with an empty client name", opts: serving.Options{CertFile: "/c", KeyFile: "/k", ClientCAFile: "/ca", ClientAllowedNames: []string{"a", ""}},
			wantErr: `--client-allowed-names "a,": name at least one client certificate`},
		{name: "no client CA", opts: serving.Options{CertFile: "/c", KeyFile: "/k"}, wantErr: "TLS needs all of"},
		{name: "only a client CA", opts: serving.Options{ClientCAFile: "/ca"}, wantErr: "TLS needs all of"},
		{name: "tls and insecure", opts: serving.Options{CertFile: "/c", Insecure: true}, wantErr: "--insecure-serve-http serves plain HTTP"},
		{name: "host name", opts: serving.Options{Insecure: true, BindAddress: "localhost"}, wantErr: `--bind-address "localhost" is not an IP address`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.Validate()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want it to mention %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.opts.Host(); got != tc.wantHost {
				t.Errorf("Host() = %q, want %q", got, tc.wantHost)
			}
		})
	}
}

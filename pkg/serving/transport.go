package serving

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"

	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/klog/v2"
)

// ClientAuth is what a listener asks of a TLS client at the handshake.
type ClientAuth int

const (
	// RequireClientCert ends the handshake of any client that presents no certificate, or
	// one that does not chain to the client CA: the scheduler verbs' listener.
	RequireClientCert ClientAuth = iota
	// VerifyClientCertIfGiven lets a client without a certificate finish the handshake
	// (kubelet's probes present none) but still refuses a certificate that does not chain to
	// the client CA; Authenticate then decides per path.
	VerifyClientCertIfGiven
)

func (a ClientAuth) tlsType() tls.ClientAuthType {
	if a == VerifyClientCertIfGiven {
		return tls.VerifyClientCertIfGiven
	}
	return tls.RequireAndVerifyClientCert
}

// Transport opens the extender's listeners. With TLS it holds the serving certificate and
// client CA and, while Run runs, re-reads both files when they change: a rotated
// certificate is served from the next handshake on, without a restart.
type Transport struct {
	opts Options
	// nil with Options.Insecure
	cert *dynamiccertificates.DynamicCertKeyPairContent
	ca   *dynamiccertificates.DynamicFileCAContent
	ctrl *dynamiccertificates.DynamicServingCertificateController
}

// New validates o and, for TLS, loads the certificate files once. It starts nothing (see
// Run). Errors: invalid options (Options.Validate), unreadable or invalid PEM files, a key
// that does not match its certificate.
func New(o Options) (*Transport, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Insecure {
		return &Transport{opts: o}, nil
	}
	cert, err := dynamiccertificates.NewDynamicServingContentFromFiles("serving-cert", o.CertFile, o.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("loading the serving certificate (--tls-cert-file, --tls-private-key-file): %w", err)
	}
	ca, err := dynamiccertificates.NewDynamicCAContentFromFile("client-ca", o.ClientCAFile)
	if err != nil {
		return nil, fmt.Errorf("loading the client CA (--client-ca-file): %w", err)
	}
	base := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// HTTP/1.1 only: a connection then carries one request at a time, so limits on
		// connections bound the requests in flight too (HTTP/2 multiplexes many).
		NextProtos: []string{"http/1.1"},
		// Listen narrows or keeps this per listener; fail closed by default.
		ClientAuth: tls.RequireAndVerifyClientCert,
	}
	ctrl := dynamiccertificates.NewDynamicServingCertificateController(base, ca, cert, nil, nil)
	cert.AddListener(ctrl)
	ca.AddListener(ctrl)
	if err := ctrl.RunOnce(); err != nil {
		return nil, fmt.Errorf("building the TLS configuration: %w", err)
	}
	return &Transport{opts: o, cert: cert, ca: ca, ctrl: ctrl}, nil
}

// Insecure reports plain HTTP.
func (t *Transport) Insecure() bool { return t.opts.Insecure }

// Run re-reads the certificate files on change (fsnotify, and once a minute) until ctx
// ends. A file that fails to load keeps the last good content in use. Returns at once for
// plain HTTP.
func (t *Transport) Run(ctx context.Context) {
	if t.opts.Insecure {
		return
	}
	go t.cert.Run(ctx, 1)
	go t.ca.Run(ctx, 1)
	t.ctrl.Run(1, ctx.Done())
}

// Listen opens a TCP listener on the transport's host and port, wrapped in TLS asking auth
// of clients (ignored for plain HTTP). Errors: the address cannot be bound.
func (t *Transport) Listen(ctx context.Context, port int, auth ClientAuth) (net.Listener, error) {
	addr := net.JoinHostPort(t.opts.Host(), strconv.Itoa(port))
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	if t.opts.Insecure {
		return ln, nil
	}
	cfg := &tls.Config{
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := t.ctrl.GetConfigForClient(hello) // a fresh copy: ours to change
			if err != nil {
				return nil, err
			}
			c.ClientAuth = auth.tlsType()
			return c, nil
		},
	}
	return tls.NewListener(ln, cfg), nil
}

// Authenticate passes to next the requests whose client presented a certificate that
// chains to the client CA, and those for anonymousPaths (exact paths; kubelet's probes
// carry no certificate); others get 401 with a JSON error. With plain HTTP it returns next
// unchanged: that mode authenticates no one.
func (t *Transport) Authenticate(next http.Handler, anonymousPaths ...string) http.Handler {
	if t.opts.Insecure {
		return next
	}
	anonymous := slices.Clone(anonymousPaths)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (r.TLS != nil && len(r.TLS.VerifiedChains) > 0) || slices.Contains(anonymous, r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		msg := fmt.Sprintf("%s needs a client certificate signed by the extender's client CA", r.URL.Path)
		if err := json.NewEncoder(w).Encode(map[string]string{"error": msg}); err != nil {
			klog.V(2).InfoS("writing response", "err", err)
		}
	})
}

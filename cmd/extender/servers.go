package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/gpushare/gpushare/pkg/metrics"
	"github.com/gpushare/gpushare/pkg/routes"
	"github.com/gpushare/gpushare/pkg/serving"
)

// openServers opens the verbs' and the diagnostics' listeners (with --profiling, the
// diagnostics serve pprof too). Errors: a listener that cannot be opened; the others are
// closed then.
func openServers(ctx context.Context, o *options, transport *serving.Transport, handlers *routes.Handlers, m *metrics.Metrics) ([]*endpoint, error) {
	diagnostics := handlers.Diagnostics()
	if o.profiling {
		diagnostics = withProfiling(diagnostics)
	}
	servers := []*endpoint{
		// The verbs' listener refuses clients without a certificate at the handshake, and
		// answers only the clients --client-allowed-names names: any other holder of a
		// certificate of the client CA could bind any pod.
		{name: "verbs", port: o.port, auth: serving.RequireClientCert, handler: transport.AllowNames(handlers.Verbs(), m.Forbidden)},
		// The probes carry no certificate: the handshake lets them through and Authenticate
		// serves them, and only them, without one.
		{name: "diagnostics", port: o.diagnosticsPort, auth: serving.VerifyClientCertIfGiven,
			handler: transport.Authenticate(diagnostics, routes.HealthzPath, routes.ReadyzPath)},
	}
	for _, e := range servers {
		var err error
		if e.ln, err = transport.Listen(ctx, e.port, e.auth); err != nil {
			closeAll(servers)
			return nil, fmt.Errorf("opening the %s listener: %w", e.name, err)
		}
	}
	return servers, nil
}

// serve serves each of servers on its listener; the returned channel receives each
// server's end. Errors: a server that cannot be built; the listeners are closed then.
func serve(servers []*endpoint, timeouts routes.Timeouts) (<-chan error, error) {
	done := make(chan error, len(servers))
	for _, e := range servers {
		var err error
		if e.srv, err = routes.NewServer(e.ln.Addr().String(), e.handler, timeouts); err != nil {
			closeAll(servers)
			return nil, err
		}
		go func() { done <- fmt.Errorf("serving %s on %s: %w", e.name, e.ln.Addr(), e.srv.Serve(e.ln)) }()
	}
	return done, nil
}

// endpoint is one of the extender's listeners and its server.
type endpoint struct {
	name    string
	port    int
	auth    serving.ClientAuth
	handler http.Handler
	ln      net.Listener
	srv     *http.Server
}

// closeAll closes the listeners opened so far.
func closeAll(es []*endpoint) {
	for _, e := range es {
		if e.ln != nil {
			_ = e.ln.Close()
		}
	}
}

// shutdown stops every server, letting in-flight requests finish within timeout (0: close
// at once).
func shutdown(ctx context.Context, es []*endpoint, timeout time.Duration) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	var errs []error
	for _, e := range es {
		if e.srv == nil {
			continue
		}
		if err := e.srv.Shutdown(sctx); err != nil {
			errs = append(errs, fmt.Errorf("graceful shutdown of the %s listener: %w", e.name, err))
			_ = e.srv.Close()
		}
	}
	return errors.Join(errs...)
}

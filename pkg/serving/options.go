package serving

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
)

// Bind addresses used when Options.BindAddress is empty: every interface when callers must
// present a client certificate, loopback only when the transport is plain HTTP.
const (
	DefaultSecureBindAddress   = "0.0.0.0"
	DefaultInsecureBindAddress = "127.0.0.1"
)

// Options choose the transport. Exactly one of the TLS file set and Insecure must be given:
// an extender that can bind any pod must never end up on plain HTTP by omission.
type Options struct {
	// BindAddress is the IP every listener binds; empty means DefaultSecureBindAddress with
	// TLS and DefaultInsecureBindAddress with Insecure.
	BindAddress string
	// CertFile and KeyFile are the PEM serving certificate (chain) and its key.
	CertFile, KeyFile string
	// ClientCAFile is the PEM bundle client certificates must chain to.
	ClientCAFile string
	// ClientAllowedNames are the client certificate names Transport.AllowNames admits (the
	// scheduler verbs' listener); TLS needs at least one, and none may be empty. Unused with
	// Insecure.
	ClientAllowedNames []string
	// Insecure serves plain HTTP without any authentication (local demo, loopback-only use).
	Insecure bool
}

// Validate reports options that cannot serve safely. Errors: neither TLS files nor
// Insecure, only some of the three TLS files, TLS files together with Insecure, TLS without
// a client name to allow (or with an empty one), or a bind address that is not an IP.
func (o Options) Validate() error {
	tlsFiles := 0
	for _, f := range []string{o.CertFile, o.KeyFile, o.ClientCAFile} {
		if f != "" {
			tlsFiles++
		}
	}
	switch {
	case o.Insecure && tlsFiles > 0:
		return errors.New("--insecure-serve-http serves plain HTTP: drop it, or drop --tls-cert-file, --tls-private-key-file and --client-ca-file")
	case !o.Insecure && tlsFiles == 0:
		return errors.New("no transport: give --tls-cert-file, --tls-private-key-file and --client-ca-file " +
			"(callers must present a client certificate signed by that CA), or --insecure-serve-http for unauthenticated plain HTTP")
	case !o.Insecure && tlsFiles < 3:
		return fmt.Errorf("TLS needs all of --tls-cert-file (%q), --tls-private-key-file (%q) and --client-ca-file (%q)",
			o.CertFile, o.KeyFile, o.ClientCAFile)
	}
	if !o.Insecure && (len(o.ClientAllowedNames) == 0 || slices.Contains(o.ClientAllowedNames, "")) {
		return fmt.Errorf("--client-allowed-names %q: name at least one client certificate (kube-scheduler's), and no empty name",
			strings.Join(o.ClientAllowedNames, ","))
	}
	if o.BindAddress != "" && net.ParseIP(o.BindAddress) == nil {
		return fmt.Errorf("--bind-address %q is not an IP address", o.BindAddress)
	}
	return nil
}

// Host is the IP the listeners bind: BindAddress, or the default for the transport.
func (o Options) Host() string {
	switch {
	case o.BindAddress != "":
		return o.BindAddress
	case o.Insecure:
		return DefaultInsecureBindAddress
	default:
		return DefaultSecureBindAddress
	}
}

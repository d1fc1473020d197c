package serving

import (
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"k8s.io/klog/v2"
)

// DefaultClientAllowedName is the one client certificate name the scheduler verbs admit
// unless told otherwise: kube-scheduler's, as the Helm chart issues it
// (deploy/helm/gpushare/templates/extender) and docs/extender.md shows it made. The chart's
// metrics certificate (gpushare-metrics) and any other certificate of the client CA are
// refused there.
const DefaultClientAllowedName = "gpushare-kube-scheduler"

// certNames are the names a client certificate identifies itself by: its Subject common
// name, DNS SANs and URI SANs, in that order; empty ones left out.
func certNames(c *x509.Certificate) []string {
	var out []string
	if c.Subject.CommonName != "" {
		out = append(out, c.Subject.CommonName)
	}
	out = append(out, c.DNSNames...)
	for _, u := range c.URIs {
		out = append(out, u.String())
	}
	return out
}

// verifiedLeaf is the client certificate of r when it chains to the client CA, else nil.
func verifiedLeaf(r *http.Request) *x509.Certificate {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return nil
	}
	return r.TLS.VerifiedChains[0][0]
}

// AllowNames passes to next the requests whose client certificate chains to the client CA
// and names one of Options.ClientAllowedNames (exactly, as its common name, a DNS SAN or a
// URI SAN). Others get 403 with a JSON error naming the certificate's names, a log line, and
// a call of refused (nil: none). The client CA alone cannot tell the scheduler from the
// other holders of its certificates (Prometheus' scrape certificate, people's inspect
// certificates): this lets only the scheduler reach what binds pods. With plain HTTP it
// returns next unchanged: that mode authenticates no one.
func (t *Transport) AllowNames(next http.Handler, refused func()) http.Handler {
	if t.opts.Insecure {
		return next
	}
	allowed := slices.Clone(t.opts.ClientAllowedNames)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaf := verifiedLeaf(r)
		var names []string
		if leaf != nil {
			names = certNames(leaf)
			if slices.ContainsFunc(names, func(n string) bool { return slices.Contains(allowed, n) }) {
				next.ServeHTTP(w, r)
				return
			}
		}
		if refused != nil {
			refused()
		}
		klog.InfoS("refused a client certificate not allowed on this listener (--client-allowed-names)",
			"path", r.URL.Path, "remoteAddr", r.RemoteAddr, "certificateNames", names, "verified", leaf != nil)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		msg := fmt.Sprintf("%s: the client certificate (names %s) is not one allowed to call the scheduler verbs (--client-allowed-names)",
			r.URL.Path, quoteNames(names))
		if leaf == nil {
			msg = r.URL.Path + " needs a client certificate signed by the extender's client CA and allowed by --client-allowed-names"
		}
		if err := json.NewEncoder(w).Encode(map[string]string{"error": msg}); err != nil {
			klog.V(2).InfoS("writing response", "err", err)
		}
	})
}

// quoteNames lists names for an error message: ["a", "b"], or "none".
func quoteNames(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

package serving_test

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/gpushare/gpushare/pkg/serving"
)

// TestVerbsAllowOnlyNamedClients: on the verbs listener a certificate of the client CA is
// not enough: only one naming an allowed client (serve's: the default
// gpushare-kube-scheduler, a SPIFFE URI, a DNS name) reaches the handler, by its common name
// or a SAN. The chart's metrics certificate, an inspect certificate and a certificate naming
// nothing get 403 with a JSON error, and each refusal is counted.
func TestVerbsAllowOnlyNamedClients(t *testing.T) {
	p := newPKI(t)
	var refusals atomic.Int64
	base := serveWith(t, p, serving.RequireClientCert, func(tr *serving.Transport) http.Handler {
		return tr.AllowNames(okHandler, func() { refusals.Add(1) })
	})
	dns := func(names ...string) func(*x509.Certificate) { return func(c *x509.Certificate) { c.DNSNames = names } }
	uri := func(s string) func(*x509.Certificate) {
		return func(c *x509.Certificate) {
			u, err := url.Parse(s)
			if err != nil {
				t.Fatal(err)
			}
			c.URIs = []*url.URL{u}
		}
	}
	noName := func(c *x509.Certificate) { c.Subject = pkix.Name{} }
	const path = "/gpushare-scheduler/bind"
	tests := []struct {
		name     string
		cert     tls.Certificate
		wantCode int
		wantBody string
	}{
		{"the scheduler's name, as the chart issues it", p.clientCA.clientCert(t, serving.DefaultClientAllowedName), 200, "ok " + path},
		{"an allowed DNS SAN", p.clientCA.clientCert(t, "something-else", dns("other.example.com", "scheduler.example.com")), 200, "ok " + path},
		{"an allowed URI SAN", p.clientCA.clientCert(t, "", uri("spiffe://cluster.local/ns/kube-system/sa/kube-scheduler")), 200, "ok " + path},
		{"the chart's metrics certificate", p.clientCA.clientCert(t, "gpushare-metrics"), 403,
			`{"error":"` + path + `: the client certificate (names [\"gpushare-metrics\"]) is not one allowed to call the scheduler verbs (--client-allowed-names)"}` + "\n"},
		{"an inspect certificate", p.clientCA.clientCert(t, "gpushare-inspect", dns("inspect.example.com")), 403,
			`{"error":"` + path + `: the client certificate (names [\"gpushare-inspect\", \"inspect.example.com\"]) is not one allowed to call the scheduler verbs (--client-allowed-names)"}` + "\n"},
		{"a certificate naming nothing", p.clientCA.clientCert(t, "", noName), 403,
			`{"error":"` + path + `: the client certificate (names none) is not one allowed to call the scheduler verbs (--client-allowed-names)"}` + "\n"},
		{"an allowed name only as a prefix", p.clientCA.clientCert(t, serving.DefaultClientAllowedName+"-evil"), 403,
			`{"error":"` + path + `: the client certificate (names [\"gpushare-kube-scheduler-evil\"]) is not one allowed to call the scheduler verbs (--client-allowed-names)"}` + "\n"},
	}
	wantRefusals := int64(0)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body, err := get(client(p, tc.cert), base+path)
			if err != nil || code != tc.wantCode || body != tc.wantBody {
				t.Fatalf("got HTTP %d %q, err %v; want %d %q", code, body, err, tc.wantCode, tc.wantBody)
			}
			if code == http.StatusForbidden {
				wantRefusals++
			}
			if got := refusals.Load(); got != wantRefusals {
				t.Errorf("refusals counted %d, want %d", got, wantRefusals)
			}
		})
	}
}

// TestAllowNamesWithoutCertificate: where the handshake lets a client without a certificate
// through, AllowNames still refuses it, so the names check never depends on the listener's
// setting alone.
func TestAllowNamesWithoutCertificate(t *testing.T) {
	p := newPKI(t)
	base := serveWith(t, p, serving.VerifyClientCertIfGiven, func(tr *serving.Transport) http.Handler {
		return tr.AllowNames(okHandler, nil)
	})
	code, body, err := get(client(p), base+"/gpushare-scheduler/filter")
	want := `{"error":"/gpushare-scheduler/filter needs a client certificate signed by the extender's client CA and allowed by --client-allowed-names"}` + "\n"
	if err != nil || code != http.StatusForbidden || body != want {
		t.Fatalf("got HTTP %d %q, err %v; want 403 %q", code, body, err, want)
	}
}

// Plain HTTP checks no name: there is no certificate to read, and that mode authenticates
// no one.
func TestAllowNamesInsecure(t *testing.T) {
	tr, err := serving.New(serving.Options{Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	tr.AllowNames(okHandler, nil).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/gpushare-scheduler/bind", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != "ok /gpushare-scheduler/bind" {
		t.Fatalf("got HTTP %d %q; want the handler's answer", rec.Code, rec.Body)
	}
}

package serving_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// testCA is a throw-away certificate authority.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a leaf certificate for usage (server: SAN 127.0.0.1 and localhost), changed
// by edits, and returns its PEM certificate and key.
func (ca *testCA) issue(t *testing.T, cn string, usage x509.ExtKeyUsage, edits ...func(*x509.Certificate)) (certPEM, keyPEM []byte) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	for _, edit := range edits {
		edit(tmpl)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// clientCert is a tls.Certificate for a client signed by ca, changed by edits.
func (ca *testCA) clientCert(t *testing.T, cn string, edits ...func(*x509.Certificate)) tls.Certificate {
	t.Helper()
	c, k := ca.issue(t, cn, x509.ExtKeyUsageClientAuth, edits...)
	pair, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t *testing.T) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// pki is the files the extender is started with: its serving pair and the client CA.
type pki struct {
	dir                   string
	certFile, keyFile, ca string
	serverCA, clientCA    *testCA
	serverCert, serverKey []byte
}

// newPKI writes a serving certificate signed by one CA and, as the client CA, another.
func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir(), serverCA: newCA(t, "server-ca"), clientCA: newCA(t, "client-ca")}
	p.certFile, p.keyFile, p.ca = filepath.Join(p.dir, "tls.crt"), filepath.Join(p.dir, "tls.key"), filepath.Join(p.dir, "client-ca.crt")
	p.rotateServing(t)
	write(t, p.ca, p.clientCA.pem)
	return p
}

// rotateServing writes a fresh serving certificate and key over the files.
func (p *pki) rotateServing(t *testing.T) {
	t.Helper()
	p.serverCert, p.serverKey = p.serverCA.issue(t, "gpushare-extender", x509.ExtKeyUsageServerAuth)
	// key first, then certificate: in between the pair mismatches, which the reloader
	// must skip rather than serve.
	write(t, p.keyFile, p.serverKey)
	write(t, p.certFile, p.serverCert)
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Package testca makes a certificate authority and certificates signed by it
// for tests that run a TLS server (Redis, Postgres) on loopback: every file
// is written under the test's temporary directory.
package testca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
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

// CA is a test certificate authority.
type CA struct {
	// CertFile is the CA certificate (PEM).
	CertFile string
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	dir      string
	serial   int64
}

// Pair is a certificate and its key, as PEM files.
type Pair struct {
	CertFile, KeyFile string
}

// New returns a fresh CA named name, with its certificate in a file.
func New(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{cert: cert, key: key, dir: t.TempDir(), serial: 1}
	ca.CertFile = ca.write(t, name+"-ca.crt", "CERTIFICATE", der)
	return ca
}

// Server issues a server certificate for hosts (DNS names or IP
// addresses), also usable as a client certificate.
func (ca *CA) Server(t testing.TB, name string, hosts ...string) Pair {
	t.Helper()
	tmpl := ca.template(name)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return ca.issue(t, name, tmpl)
}

// Client issues a client certificate with common name name.
func (ca *CA) Client(t testing.TB, name string) Pair {
	t.Helper()
	tmpl := ca.template(name)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return ca.issue(t, name, tmpl)
}

func (ca *CA) template(name string) *x509.Certificate {
	ca.serial++
	return &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
}

func (ca *CA) issue(t testing.TB, name string, tmpl *x509.Certificate) Pair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Pair{
		CertFile: ca.write(t, name+".crt", "CERTIFICATE", der),
		KeyFile:  ca.write(t, name+".key", "PRIVATE KEY", kder),
	}
}

func (ca *CA) write(t testing.TB, name, typ string, der []byte) string {
	t.Helper()
	p := filepath.Join(ca.dir, name)
	mode := os.FileMode(0o644)
	if typ == "PRIVATE KEY" {
		mode = 0o600
	}
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode); err != nil {
		t.Fatal(err)
	}
	return p
}

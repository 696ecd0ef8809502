package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/toolcrib/toolcrib/platform/config"
	"github.com/toolcrib/toolcrib/platform/tlsconfig"
)

// The development PKI `toolcrib dev up` (and `toolcrib dev certs`) keeps
// under devDir: a CA, one certificate per service (server and client use,
// SPIFFE ID spiffe://toolcrib.dev/toolcrib/<service>, DNS localhost, IP
// 127.0.0.1) and one client certificate for the CLI and the example hosts
// (spiffe://toolcrib.dev/client: not a service identity, so it adds no
// role; the bearer token decides). Every key is ECDSA P-256.

// devTrustDomain is the SPIFFE trust domain of the dev certificates.
const devTrustDomain = "toolcrib.dev"

// devCAFile is the dev CA's certificate, which the CLI trusts by default
// (looked for upward from the working directory, like the admin token).
const devCAFile = devDir + "/ca.pem"

// devClientName is the file name (<name>.pem, <name>-key.pem) of the client
// certificate of the CLI and the example hosts.
const devClientName = "client"

// devClientCertFile and devClientKeyFile are the CLI's default client
// certificate (looked for upward, like the CA).
const (
	devClientCertFile = devDir + "/" + devClientName + ".pem"
	devClientKeyFile  = devDir + "/" + devClientName + "-key.pem"
)

// devServices are the services with a dev certificate, in start order.
var devServices = []string{"registry", "discovery", "admission", "lease", "gateway"}

// devConsole has a dev certificate too (its listener serves TLS, and its
// client certificate passes the other services' mTLS), but it is not among
// devServices: its SPIFFE ID is no service identity, so its certificate
// alone gives it no role; every call it makes carries its user's token.
const devConsole = "console"

// Lifetimes: a certificate is renewed once less than its renewal margin is
// left, so a `dev up` never starts with one that expires while it runs for
// a working week. The CA outlives every certificate it signs.
const (
	devCALifetime   = 365 * 24 * time.Hour
	devCARenewal    = 60 * 24 * time.Hour
	devLeafLifetime = 30 * 24 * time.Hour
	devLeafRenewal  = 10 * 24 * time.Hour
)

// devServiceIdentity is the SPIFFE ID of a toolcrib service's dev
// certificate.
func devServiceIdentity(service string) string {
	return "spiffe://" + devTrustDomain + "/toolcrib/" + service
}

// devPKI are the files of the development PKI.
type devPKI struct {
	dir    string
	CAFile string
	caKey  string
}

// certFiles are the certificate and key files of name (a service or
// devClientName).
func (p devPKI) certFiles(name string) (cert, key string) {
	return filepath.Join(p.dir, name+".pem"), filepath.Join(p.dir, name+"-key.pem")
}

// serviceTLS is the TLS configuration of service under `dev up`: its
// certificate on its listeners and on its calls to the other services,
// client certificates of the dev CA required (mTLS), and the other
// services' certificates mapped to the service role.
func (p devPKI) serviceTLS(service string) tlsconfig.Options {
	cert, key := p.certFiles(service)
	return tlsconfig.Options{CertFile: cert, KeyFile: key, ClientCAFile: p.CAFile,
		CAFile: p.CAFile, ClientCertFile: cert, ClientKeyFile: key}
}

// devIdentities are the SPIFFE IDs of every dev service certificate
// (--tls-service-identities).
func devIdentities() string {
	var ids []string
	for _, s := range devServices {
		ids = append(ids, devServiceIdentity(s))
	}
	return strings.Join(ids, ",")
}

// applyDevTLS puts service's dev TLS configuration into c.
func (p devPKI) applyDevTLS(c *config.Common, service string) {
	min := c.TLS.MinVersion
	c.TLS = p.serviceTLS(service)
	c.TLS.MinVersion = min
	c.TLSServiceIdentities = devIdentities()
}

// ensureDevPKI makes or renews the dev CA and certificates in dir: each is
// kept while it is valid for longer than its renewal margin at now, was
// signed by the current CA and names what it should; otherwise it is made
// anew (a new CA renews every certificate). It returns what it renewed,
// for the start-up message.
func ensureDevPKI(dir string, now time.Time) (devPKI, []string, error) {
	p := devPKI{dir: dir, CAFile: filepath.Join(dir, "ca.pem"), caKey: filepath.Join(dir, "ca-key.pem")}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return p, nil, err
	}
	var made []string
	ca, caKey, err := loadPair(p.CAFile, p.caKey)
	if err != nil || !ca.IsCA || now.Add(devCARenewal).After(ca.NotAfter) || now.Before(ca.NotBefore) {
		if ca, caKey, err = newDevCA(p.CAFile, p.caKey, now); err != nil {
			return p, nil, fmt.Errorf("dev CA: %w", err)
		}
		made = append(made, "CA")
	}
	for _, name := range append(slices.Clone(devServices), devConsole, devClientName) {
		uri, dns := devServiceIdentity(name), []string{"localhost"}
		if name == devClientName {
			uri, dns = "spiffe://"+devTrustDomain+"/"+devClientName, nil
		}
		cert, key := p.certFiles(name)
		if leaf, _, err := loadPair(cert, key); err == nil && leafCurrent(leaf, ca, uri, now) {
			continue
		}
		if err := issueDev(ca, caKey, cert, key, name, uri, dns, name != devClientName, now); err != nil {
			return p, nil, fmt.Errorf("dev certificate of %s: %w", name, err)
		}
		made = append(made, name)
	}
	return p, made, nil
}

// leafCurrent reports whether leaf is signed by ca, names uri, and stays
// valid beyond the renewal margin.
func leafCurrent(leaf, ca *x509.Certificate, uri string, now time.Time) bool {
	if leaf.CheckSignatureFrom(ca) != nil || now.Before(leaf.NotBefore) || now.Add(devLeafRenewal).After(leaf.NotAfter) {
		return false
	}
	return len(leaf.URIs) == 1 && leaf.URIs[0].String() == uri
}

// loadPair reads a certificate and its key and checks that they match.
func loadPair(certFile, keyFile string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, nil, err
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, nil, errors.New("not an ECDSA key")
	}
	return pair.Leaf, key, nil
}

func newDevCA(certFile, keyFile string, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          newSerial(),
		Subject:               pkix.Name{CommonName: "toolcrib development CA", Organization: []string{"toolcrib dev"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(devCALifetime),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	if err := writePEM(certFile, keyFile, der, key); err != nil {
		return nil, nil, err
	}
	ca, err := x509.ParseCertificate(der)
	return ca, key, err
}

func issueDev(ca *x509.Certificate, caKey *ecdsa.PrivateKey, certFile, keyFile, name, uri string, dns []string, server bool, now time.Time) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	u, err := url.Parse(uri)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: newSerial(),
		Subject:      pkix.Name{CommonName: "toolcrib " + name + " (dev)", Organization: []string{"toolcrib dev"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(devLeafLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		URIs:         []*url.URL{u},
		DNSNames:     dns,
	}
	if server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	return writePEM(certFile, keyFile, der, key)
}

// writePEM writes the certificate (0644) and the key (0600), the key first,
// each through a temporary file and a rename, so a reader never sees half.
func writePEM(certFile, keyFile string, der []byte, key *ecdsa.PrivateKey) error {
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := writeAtomic(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return err
	}
	return writeAtomic(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

func writeAtomic(path string, b []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func newSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}

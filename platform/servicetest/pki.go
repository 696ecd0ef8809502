package servicetest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/toolcrib/toolcrib/platform/config"
	"github.com/toolcrib/toolcrib/platform/tlsconfig"
	"github.com/toolcrib/toolcrib/platform/tlsconfig/tlstest"
)

// TrustDomain is the SPIFFE trust domain of test services.
const TrustDomain = "toolcrib.test"

// Services are the toolcrib services whose SPIFFE IDs every test service
// maps to the service role under a [PKI].
var Services = []string{"registry", "discovery", "admission", "lease", "gateway"}

// ServiceID is a test service's SPIFFE ID,
// spiffe://toolcrib.test/toolcrib/<service>.
func ServiceID(service string) string {
	return "spiffe://" + TrustDomain + "/toolcrib/" + service
}

// PKI is a test CA for services started with TLS and mTLS between them:
// one server certificate for loopback shared by every listener, and one
// client certificate per service with its SPIFFE ID, by which the callee
// knows it (no service token is sent). Tests' own clients present a
// certificate without a SPIFFE ID and send their tokens.
type PKI struct {
	// CA signs every certificate.
	CA *tlstest.CA
	// CAFile is the CA certificate, the listeners' client CA and the
	// clients' root.
	CAFile string
	// CertFile and KeyFile are the listeners' certificate.
	CertFile, KeyFile string

	dir    string
	mu     sync.Mutex
	issued map[string][2]string // service -> client cert and key files
	client *tlsconfig.Client    // tests' own clients
}

// NewPKI makes the CA and the listeners' certificate in a temporary
// directory.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "toolcrib test CA")
	p := &PKI{CA: ca, CAFile: ca.WriteCA(t, dir, "ca"), dir: dir, issued: map[string][2]string{}}
	p.CertFile, p.KeyFile = ca.Issue(t, tlstest.Leaf{CommonName: "toolcrib", Server: true}).Write(t, dir, "server")
	cert, key := ca.Issue(t, tlstest.Leaf{CommonName: "test-client"}).Write(t, dir, "test-client")
	c, err := tlsconfig.NewClient(tlsconfig.Options{CAFile: p.CAFile, ClientCertFile: cert, ClientKeyFile: key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.client = c
	return p
}

// clientPair returns the client certificate files of service, issued once.
func (p *PKI) clientPair(t testing.TB, service string) (string, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f, ok := p.issued[service]; ok {
		return f[0], f[1]
	}
	cert, key := p.CA.Issue(t, tlstest.Leaf{CommonName: service, URIs: []string{ServiceID(service)}}).Write(t, p.dir, "client-"+service)
	p.issued[service] = [2]string{cert, key}
	return cert, key
}

// Apply configures c as service under the PKI: TLS on its listeners with
// client certificates required (mTLS), TLS 1.3, its outgoing clients
// trusting the CA and presenting the service's certificate, every test
// service's SPIFFE ID mapped to the service role, and no service token: the
// service is known to the others by its certificate.
func (p *PKI) Apply(t testing.TB, c *config.Common, service string) {
	t.Helper()
	cert, key := p.clientPair(t, service)
	c.TLS = tlsconfig.Options{
		CertFile: p.CertFile, KeyFile: p.KeyFile, ClientCAFile: p.CAFile,
		CAFile: p.CAFile, ClientCertFile: cert, ClientKeyFile: key,
	}
	ids := make([]string, len(Services))
	for i, s := range Services {
		ids[i] = ServiceID(s)
	}
	c.TLSServiceIdentities = strings.Join(ids, ",")
	c.ServiceTokenFile = ""
}

// Transport is the transport security of tests' own clients: TLS with the
// test client's certificate.
func (p *PKI) Transport() credentials.TransportCredentials { return p.client.TransportCredentials() }

// transport is the Auth's clients' transport: its PKI's, or plaintext.
func (a *Auth) transport() credentials.TransportCredentials {
	if a.TLS == nil {
		return insecure.NewCredentials()
	}
	return a.TLS.Transport()
}

// CommonAs is [Auth.Common] for the named service: with a [PKI] set on the
// Auth (Auth.TLS), the service runs under it ([PKI.Apply]).
func (a *Auth) CommonAs(t testing.TB, service, postgresURL string, redis bool, listening func(string)) config.Common {
	t.Helper()
	c := a.Common(t, postgresURL, redis, listening)
	if a.TLS != nil {
		a.TLS.Apply(t, &c, service)
	}
	return c
}

// Start is [Start] waiting for health over the Auth's transport.
func (a *Auth) Start(t testing.TB, run func(ctx context.Context, listening func(string)) error) string {
	t.Helper()
	return start(t, a.transport(), run)
}

// Dial is [Dial] over the Auth's transport.
func (a *Auth) Dial(t testing.TB, addr, token string) *grpc.ClientConn {
	t.Helper()
	return dial(t, a.transport(), addr, token)
}

// ServiceTransport is the transport of a client presenting service's
// certificate (its SPIFFE ID), as that service's own clients do.
func (p *PKI) ServiceTransport(t testing.TB, service string) credentials.TransportCredentials {
	t.Helper()
	cert, key := p.clientPair(t, service)
	c, err := tlsconfig.NewClient(tlsconfig.Options{CAFile: p.CAFile, ClientCertFile: cert, ClientKeyFile: key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c.TransportCredentials()
}

// ServerTrust is a client configuration that trusts the PKI's listeners
// without presenting a certificate, as an MCP client of the gateway does.
func (p *PKI) ServerTrust() *tls.Config {
	roots := x509.NewCertPool()
	roots.AddCert(p.CA.Cert)
	return &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13}
}

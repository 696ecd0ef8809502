package principal

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/toolcrib/toolcrib/platform/tlsconfig"
	"github.com/toolcrib/toolcrib/platform/tlsconfig/tlstest"
)

const (
	admissionID = "spiffe://example.org/toolcrib/admission"
	gatewayID   = "spiffe://example.org/toolcrib/gateway"
)

// whoDesc is a one-method service answering with the caller's principal.
var whoDesc = grpc.ServiceDesc{
	ServiceName: "test.Who",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Who", Handler: func(_ any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
		in := new(emptypb.Empty)
		if err := dec(in); err != nil {
			return nil, err
		}
		return icpt(ctx, in, &grpc.UnaryServerInfo{FullMethod: "/test.Who/Who"}, func(ctx context.Context, _ any) (any, error) {
			p, err := Require(ctx)
			if err != nil {
				return nil, err
			}
			return wrapperspb.String(fmt.Sprintf("%s|%s|admin=%t|service=%t", p.Subject, p.Tenant, p.Admin, p.Service)), nil
		})
	}}},
}

// mtlsWorld is a gRPC server on loopback under mTLS with a verifier that
// maps admissionID to the service role, and the files of its test CA.
type mtlsWorld struct {
	addr   string
	signer *Signer
	ca     *tlstest.CA
	caFile string
	dir    string
}

func newMTLSWorld(t *testing.T) *mtlsWorld {
	t.Helper()
	s, plain := newPair(t)
	cfg := plain.cfg
	cfg.ServiceIdentities = []string{admissionID}
	v, err := NewVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "test CA")
	w := &mtlsWorld{signer: s, ca: ca, caFile: ca.WriteCA(t, dir, "ca"), dir: dir}
	cert, key := ca.Issue(t, tlstest.Leaf{CommonName: "server", Server: true}).Write(t, dir, "server")
	srv, err := tlsconfig.NewServer(tlsconfig.Options{CertFile: cert, KeyFile: key, ClientCAFile: w.caFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(srv.GRPC()), grpc.UnaryInterceptor(v.UnaryServerInterceptor()))
	g.RegisterService(&whoDesc, nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	w.addr = lis.Addr().String()
	return w
}

// who calls on a connection presenting a client certificate with uris
// (none: no URI SAN) and token (empty: no authorization metadata).
func (w *mtlsWorld) who(t *testing.T, uris []string, token string) (string, error) {
	t.Helper()
	name := strings.NewReplacer(":", "_", "/", "_").Replace(strings.Join(uris, "+") + "client")
	cert, key := w.ca.Issue(t, tlstest.Leaf{CommonName: "client", URIs: uris}).Write(t, w.dir, name)
	c, err := tlsconfig.NewClient(tlsconfig.Options{CAFile: w.caFile, ClientCertFile: cert, ClientKeyFile: key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(c.TransportCredentials())}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(BearerToken(token)))
	}
	conn, err := grpc.NewClient(w.addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out := new(wrapperspb.StringValue)
	err = conn.Invoke(ctx, "/test.Who/Who", &emptypb.Empty{}, out)
	return out.GetValue(), err
}

func (w *mtlsWorld) token(t *testing.T, c Claims) string {
	t.Helper()
	tok, err := w.signer.Mint(c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// A call without a bearer token on an mTLS connection whose verified
// client certificate carries a configured SPIFFE ID is that service, with
// the service role and nothing more.
func TestServiceIdentifiedBySPIFFECertificate(t *testing.T) {
	w := newMTLSWorld(t)
	got, err := w.who(t, []string{admissionID}, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := admissionID + "|platform|admin=false|service=true"; got != want {
		t.Fatalf("principal %q; want %q", got, want)
	}
}

// A certificate identifies no one when its SPIFFE ID is not configured,
// when it has no URI SAN, or when it has more than one (an X.509-SVID has
// exactly one): the call needs a token then.
func TestCertificateWithoutAConfiguredIdentityIsNoOne(t *testing.T) {
	w := newMTLSWorld(t)
	for name, uris := range map[string][]string{
		"unmapped":       {gatewayID},
		"no URI":         nil,
		"two URIs":       {admissionID, gatewayID},
		"other path":     {"spiffe://example.org/admission"},
		"other domain":   {"spiffe://example.com/toolcrib/admission"},
		"not spiffe":     {"https://example.org/toolcrib/admission"},
		"suffix of path": {admissionID + "/x"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := w.who(t, uris, "")
			if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "missing authorization metadata") {
				t.Fatalf("err = %v; want UNAUTHENTICATED for a missing token", err)
			}
		})
	}
}

// The bearer token is the caller whenever the call carries one: a tenant
// token on a connection with a service certificate stays the tenant (no
// service role from the connection), and an invalid token is refused, not
// replaced by the certificate.
func TestTokenOnServiceCertificateConnectionIsTheCaller(t *testing.T) {
	w := newMTLSWorld(t)
	tenant := w.token(t, Claims{Subject: "alice", Tenant: "tenant-a", Groups: []string{"readers"}})
	got, err := w.who(t, []string{admissionID}, tenant)
	if err != nil {
		t.Fatal(err)
	}
	if want := "alice|tenant-a|admin=false|service=false"; got != want {
		t.Fatalf("principal %q; want %q", got, want)
	}
	_, err = w.who(t, []string{admissionID}, "not-a-token")
	if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "invalid token") {
		t.Fatalf("invalid token on a service certificate: %v; want UNAUTHENTICATED invalid token", err)
	}
}

// Only a certificate the listener verified counts: a listener without
// client CAs asks for none, so a configured identity cannot be claimed
// there.
func TestIdentityNeedsAVerifiedCertificate(t *testing.T) {
	_, plain := newPair(t)
	cfg := plain.cfg
	cfg.ServiceIdentities = []string{admissionID}
	v, err := NewVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ca := tlstest.NewCA(t, "test CA")
	leaf, err := x509FromPEM(ca.Issue(t, tlstest.Leaf{CommonName: "client", URIs: []string{admissionID}}).Cert)
	if err != nil {
		t.Fatal(err)
	}
	// The peer presented the certificate but nothing verified it.
	ctx := peerContext(credentials.TLSInfo{State: tlsStateWithPeer(leaf)})
	if p, ok := v.peerService(ctx); ok {
		t.Fatalf("unverified certificate identified %+v", p)
	}
	ctx = peerContext(credentials.TLSInfo{State: tlsStateVerified(leaf)})
	if _, ok := v.peerService(ctx); !ok {
		t.Fatal("verified certificate did not identify the service")
	}
}

func TestParseServiceIdentities(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		ok   bool
	}{
		{"", nil, true},
		{admissionID, []string{admissionID}, true},
		{admissionID + ", " + gatewayID, []string{admissionID, gatewayID}, true},
		{"spiffe://example.org/toolcrib/", nil, false},
		{"spiffe://example.org/toolcrib/a/b", nil, false},
		{"spiffe://example.org/other/admission", nil, false},
		{"https://example.org/toolcrib/admission", nil, false},
		{"spiffe:///toolcrib/admission", nil, false},
		{"spiffe://example.org:8443/toolcrib/admission", nil, false},
		{"spiffe://example.org/toolcrib/admission?x=1", nil, false},
	} {
		got, err := ParseServiceIdentities(tc.in)
		if (err == nil) != tc.ok || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("ParseServiceIdentities(%q) = %q, %v", tc.in, got, err)
		}
	}
	_, plain := newPair(t)
	cfg := plain.cfg
	cfg.ServiceIdentities, cfg.PlatformTenant, cfg.AdminGroup, cfg.ServiceGroup = []string{admissionID}, "", "", ""
	if _, err := NewVerifier(cfg); err == nil {
		t.Fatal("service identities without a platform tenant accepted")
	}
}

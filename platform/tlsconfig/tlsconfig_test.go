package tlsconfig_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/toolcrib/toolcrib/platform/tlsconfig"
	"github.com/toolcrib/toolcrib/platform/tlsconfig/tlstest"
)

// pki is a CA with a server certificate and a client certificate, written
// to a temporary directory.
type pki struct {
	dir                   string
	ca                    *tlstest.CA
	caFile                string
	certFile, keyFile     string
	clientCert, clientKey string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "test CA")
	p := &pki{dir: dir, ca: ca, caFile: ca.WriteCA(t, dir, "ca")}
	p.certFile, p.keyFile = ca.Issue(t, tlstest.Leaf{CommonName: "server", Server: true}).Write(t, dir, "server")
	p.clientCert, p.clientKey = ca.Issue(t, tlstest.Leaf{CommonName: "client",
		URIs: []string{"spiffe://example.org/toolcrib/admission"}}).Write(t, dir, "client")
	return p
}

// logBuffer collects log output safely across goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// serve runs a gRPC server with health on loopback with the server TLS of
// o and returns its address and health server.
func serve(t *testing.T, o tlsconfig.Options, logs *logBuffer) (string, *health.Server) {
	t.Helper()
	var logger *slog.Logger
	if logs != nil {
		logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	srv, err := tlsconfig.NewServer(o, logger)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(srv.GRPC()))
	hs := health.NewServer()
	healthpb.RegisterHealthServer(g, hs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	return lis.Addr().String(), hs
}

// check makes one health call on a new connection with creds and returns
// the server's leaf certificate.
func check(t *testing.T, addr string, creds credentials.TransportCredentials) (*x509.Certificate, error) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var p peer.Peer
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p)); err != nil {
		return nil, err
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		t.Fatalf("connection is not TLS: %T", p.AuthInfo)
	}
	return info.State.PeerCertificates[0], nil
}

func clientCreds(t *testing.T, o tlsconfig.Options) credentials.TransportCredentials {
	t.Helper()
	c, err := tlsconfig.NewClient(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c.TransportCredentials()
}

// wantRefused asserts a call failed in the transport (UNAVAILABLE) with a
// message naming the TLS failure.
func wantRefused(t *testing.T, err error, why string) {
	t.Helper()
	if err == nil {
		t.Fatalf("call succeeded; want it refused (%s)", why)
	}
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), why) {
		t.Fatalf("err = %v; want UNAVAILABLE naming %q", err, why)
	}
}

// serverRefusal makes a TLS connection with c's configuration and reads:
// under TLS 1.3 the client's handshake ends before the server has checked
// the client's certificate, so the server's refusal is the alert the read
// returns. (Through gRPC the same refusal is UNAVAILABLE with either the
// alert or a broken pipe, whichever the client sees first.)
func serverRefusal(t *testing.T, addr string, c *tlsconfig.Client) error {
	t.Helper()
	cfg := c.Config()
	cfg.NextProtos = []string{"h2"}
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = conn.Read(make([]byte, 1))
	if errors.Is(err, io.EOF) {
		t.Fatal("server closed without an alert")
	}
	return err
}

func newClient(t *testing.T, o tlsconfig.Options) *tlsconfig.Client {
	t.Helper()
	c, err := tlsconfig.NewClient(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestTLSListenerServesItsCertificate(t *testing.T) {
	p := newPKI(t)
	addr, _ := serve(t, tlsconfig.Options{CertFile: p.certFile, KeyFile: p.keyFile}, nil)
	leaf, err := check(t, addr, clientCreds(t, tlsconfig.Options{CAFile: p.caFile}))
	if err != nil {
		t.Fatal(err)
	}
	if leaf.Subject.CommonName != "server" {
		t.Fatalf("served %q", leaf.Subject.CommonName)
	}
}

func TestPlaintextClientRefusedOnTLSListener(t *testing.T) {
	p := newPKI(t)
	addr, _ := serve(t, tlsconfig.Options{CertFile: p.certFile, KeyFile: p.keyFile}, nil)
	_, err := check(t, addr, insecure.NewCredentials())
	// The server reads the HTTP/2 preface as a TLS record and hangs up.
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v; want UNAVAILABLE", err)
	}
	// A nil client (no TLS flags) is that same plaintext client.
	var none *tlsconfig.Client
	if got := none.TransportCredentials().Info().SecurityProtocol; got != "insecure" {
		t.Fatalf("nil client security protocol %q; want insecure", got)
	}
}

func TestServerCertificateFromAnotherCARefused(t *testing.T) {
	p := newPKI(t)
	addr, _ := serve(t, tlsconfig.Options{CertFile: p.certFile, KeyFile: p.keyFile}, nil)
	other := tlstest.NewCA(t, "other CA").WriteCA(t, t.TempDir(), "other")
	_, err := check(t, addr, clientCreds(t, tlsconfig.Options{CAFile: other}))
	wantRefused(t, err, "certificate signed by unknown authority")
}

func TestClientCertificateFromAnotherCARefusedUnderMTLS(t *testing.T) {
	p := newPKI(t)
	addr, _ := serve(t, tlsconfig.Options{CertFile: p.certFile, KeyFile: p.keyFile, ClientCAFile: p.caFile}, nil)
	// The right client certificate passes ...
	if _, err := check(t, addr, clientCreds(t, tlsconfig.Options{CAFile: p.caFile, ClientCertFile: p.clientCert, ClientKeyFile: p.clientKey})); err != nil {
		t.Fatalf("client with a certificate of the client CA: %v", err)
	}
	// ... one from another CA, with the same names, does not.
	cert, key := tlstest.NewCA(t, "other CA").Issue(t, tlstest.Leaf{CommonName: "client",
		URIs: []string{"spiffe://example.org/toolcrib/admission"}}).Write(t, t.TempDir(), "intruder")
	intruder := newClient(t, tlsconfig.Options{CAFile: p.caFile, ClientCertFile: cert, ClientKeyFile: key})
	if _, err := check(t, addr, intruder.TransportCredentials()); status.Code(err) != codes.Unavailable {
		t.Fatalf("gRPC call with a client certificate of another CA: %v; want UNAVAILABLE", err)
	}
	if err := serverRefusal(t, addr, intruder); err == nil || !strings.Contains(err.Error(), "tls: unknown certificate authority") {
		t.Fatalf("server's answer %v; want the unknown-CA alert", err)
	}
}

func TestClientWithoutCertificateRefusedUnderMTLS(t *testing.T) {
	p := newPKI(t)
	addr, _ := serve(t, tlsconfig.Options{CertFile: p.certFile, KeyFile: p.keyFile, ClientCAFile: p.caFile}, nil)
	anonymous := newClient(t, tlsconfig.Options{CAFile: p.caFile})
	if _, err := check(t, addr, anonymous.TransportCredentials()); status.Code(err) != codes.Unavailable {
		t.Fatalf("gRPC call without a client certificate: %v; want UNAVAILABLE", err)
	}
	if err := serverRefusal(t, addr, anonymous); err == nil || !strings.Contains(err.Error(), "tls: certificate required") {
		t.Fatalf("server's answer %v; want the certificate-required alert", err)
	}
}

func TestMinimumVersion(t *testing.T) {
	p := newPKI(t)
	roots := x509.NewCertPool()
	roots.AddCert(p.ca.Cert)
	tls12 := credentials.NewTLS(&tls.Config{RootCAs: roots, MaxVersion: tls.VersionTLS12})
	for _, tc := range []struct {
		min     string
		refused bool
	}{
		{"", true}, // the default is 1.3
		{"1.3", true},
		{"1.2", false},
	} {
		t.Run("min="+tc.min, func(t *testing.T) {
			addr, _ := serve(t, tlsconfig.Options{CertFile: p.certFile, KeyFile: p.keyFile, MinVersion: tc.min}, nil)
			_, err := check(t, addr, tls12)
			if tc.refused {
				wantRefused(t, err, "protocol version")
			} else if err != nil {
				t.Fatalf("TLS 1.2 client with --tls-min-version 1.2: %v", err)
			}
		})
	}
}

// A certificate rotated on disk is served to new connections without a
// restart while a call on a connection made before keeps going; a rotation
// that does not load keeps the last good certificate and is logged.
func TestRotatedCertificateServedToNewConnections(t *testing.T) {
	p := newPKI(t)
	logs := &logBuffer{}
	addr, hs := serve(t, tlsconfig.Options{CertFile: p.certFile, KeyFile: p.keyFile, CheckInterval: 20 * time.Millisecond}, logs)
	creds := clientCreds(t, tlsconfig.Options{CAFile: p.caFile})

	// A long call (a health Watch stream) on a connection made before.
	old, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hs.SetServingStatus("svc", healthpb.HealthCheckResponse_NOT_SERVING)
	watch, err := healthpb.NewHealthClient(old).Watch(ctx, &healthpb.HealthCheckRequest{Service: "svc"})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := watch.Recv(); err != nil || m.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("first watch message %v %v", m, err)
	}

	first, err := check(t, addr, creds)
	if err != nil {
		t.Fatal(err)
	}
	rotated := p.ca.Issue(t, tlstest.Leaf{CommonName: "server-rotated", Server: true})
	rotated.Write(t, p.dir, "server")
	deadline := time.Now().Add(5 * time.Second)
	for {
		leaf, err := check(t, addr, creds)
		if err != nil {
			t.Fatal(err)
		}
		if leaf.Subject.CommonName == "server-rotated" {
			if leaf.SerialNumber.Cmp(first.SerialNumber) == 0 {
				t.Fatal("same serial after rotation")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still served %q 5s after the rotation", leaf.Subject.CommonName)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// The call made before the rotation completes on its connection.
	hs.SetServingStatus("svc", healthpb.HealthCheckResponse_SERVING)
	if m, err := watch.Recv(); err != nil || m.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("watch after rotation: %v %v", m, err)
	}
	if _, err := healthpb.NewHealthClient(old).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("old connection after rotation: %v", err)
	}

	// A bad rotation (a key that does not match) keeps the last good pair.
	other := p.ca.Issue(t, tlstest.Leaf{CommonName: "server-broken", Server: true})
	tlstest.WriteFile(t, p.certFile, other.Cert)
	time.Sleep(50 * time.Millisecond)
	for range 3 {
		leaf, err := check(t, addr, creds)
		if err != nil {
			t.Fatalf("after a bad rotation: %v", err)
		}
		if leaf.Subject.CommonName != "server-rotated" {
			t.Fatalf("after a bad rotation served %q; want the last good certificate", leaf.Subject.CommonName)
		}
		time.Sleep(30 * time.Millisecond)
	}
	if got := strings.Count(logs.String(), "changed files do not load"); got != 1 {
		t.Fatalf("bad rotation logged %d times; want once:\n%s", got, logs.String())
	}
	if !strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("bad rotation not a warning:\n%s", logs.String())
	}

	// A file that disappears (a secret being replaced) keeps the last good
	// pair too, and is logged once, not at every check.
	if err := os.Remove(p.keyFile); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		time.Sleep(30 * time.Millisecond)
		leaf, err := check(t, addr, creds)
		if err != nil || leaf.Subject.CommonName != "server-rotated" {
			t.Fatalf("with the key file gone: %v %v; want the last good certificate", leaf, err)
		}
	}
	if got := strings.Count(logs.String(), "no such file"); got != 1 {
		t.Fatalf("missing key file logged %d times; want once:\n%s", got, logs.String())
	}
}

// The client side re-reads its files too: a client certificate rotated on
// disk is presented on the next connection, and a CA bundle rotated on disk
// is what the next connection verifies the server against.
func TestClientFilesReRead(t *testing.T) {
	p := newPKI(t)
	addr, _ := serve(t, tlsconfig.Options{CertFile: p.certFile, KeyFile: p.keyFile, ClientCAFile: p.caFile}, nil)
	caFile := filepath.Join(t.TempDir(), "roots.crt")
	other := tlstest.NewCA(t, "other CA")
	tlstest.WriteFile(t, caFile, other.PEM)
	c, err := tlsconfig.NewClient(tlsconfig.Options{CAFile: caFile, ClientCertFile: p.clientCert, ClientKeyFile: p.clientKey, CheckInterval: time.Nanosecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = check(t, addr, c.TransportCredentials())
	wantRefused(t, err, "certificate signed by unknown authority")
	tlstest.WriteFile(t, caFile, append(append([]byte{}, other.PEM...), p.ca.PEM...))
	if _, err := check(t, addr, c.TransportCredentials()); err != nil {
		t.Fatalf("after adding the server's CA to the bundle: %v", err)
	}
	// A client certificate from another CA, rotated in, is refused by the
	// server: the new file is what the client presents.
	intruder := other.Issue(t, tlstest.Leaf{CommonName: "client"})
	tlstest.WriteFile(t, p.clientCert, intruder.Cert)
	tlstest.WriteFile(t, p.clientKey, intruder.Key)
	if err := serverRefusal(t, addr, c); err == nil || !strings.Contains(err.Error(), "tls: unknown certificate authority") {
		t.Fatalf("server's answer %v; want the unknown-CA alert for the rotated-in certificate", err)
	}
}

func TestFilesThatDoNotLoadAtStartAreConfigErrors(t *testing.T) {
	p := newPKI(t)
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	tlstest.WriteFile(t, garbage, []byte("not a certificate"))
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, tc := range []struct {
		name   string
		o      tlsconfig.Options
		server bool
		flag   string
	}{
		{"missing cert", tlsconfig.Options{CertFile: missing, KeyFile: p.keyFile}, true, "--tls-cert-file"},
		{"garbage cert", tlsconfig.Options{CertFile: garbage, KeyFile: p.keyFile}, true, "--tls-cert-file"},
		{"key of another cert", tlsconfig.Options{CertFile: p.certFile, KeyFile: p.clientKey}, true, "--tls-cert-file"},
		{"garbage client CA", tlsconfig.Options{CertFile: p.certFile, KeyFile: p.keyFile, ClientCAFile: garbage}, true, "--tls-client-ca-file"},
		{"missing CA", tlsconfig.Options{CAFile: missing}, false, "--tls-ca-file"},
		{"garbage CA", tlsconfig.Options{CAFile: garbage}, false, "--tls-ca-file"},
		{"garbage client cert", tlsconfig.Options{CAFile: p.caFile, ClientCertFile: garbage, ClientKeyFile: p.clientKey}, false, "--tls-client-cert-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.server {
				_, err = tlsconfig.NewServer(tc.o, nil)
			} else {
				_, err = tlsconfig.NewClient(tc.o, nil)
			}
			if err == nil || !strings.HasPrefix(err.Error(), tc.flag+": ") {
				t.Fatalf("err = %v; want one naming %s", err, tc.flag)
			}
		})
	}
	if s, err := tlsconfig.NewServer(tlsconfig.Options{}, nil); s != nil || err != nil {
		t.Fatalf("no files: server %v, %v; want nil, nil (plaintext)", s, err)
	}
	if c, err := tlsconfig.NewClient(tlsconfig.Options{}, nil); c != nil || err != nil {
		t.Fatalf("no files: client %v, %v; want nil, nil (plaintext)", c, err)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    tlsconfig.Options
		want []string
	}{
		{"plaintext", tlsconfig.Options{}, nil},
		{"1.2", tlsconfig.Options{MinVersion: "1.2"}, nil},
		{"1.1", tlsconfig.Options{MinVersion: "1.1"}, []string{`--tls-min-version: "1.1" must be 1.2 or 1.3`}},
		{"cert without key", tlsconfig.Options{CertFile: "a"}, []string{"--tls-cert-file: --tls-cert-file and --tls-key-file go together"}},
		{"client CA without cert", tlsconfig.Options{ClientCAFile: "a"}, []string{"--tls-client-ca-file: needs --tls-cert-file and --tls-key-file: client certificates are asked for only over TLS"}},
		{"client key without cert", tlsconfig.Options{ClientKeyFile: "a"}, []string{"--tls-client-cert-file: --tls-client-cert-file and --tls-client-key-file go together"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			tc.o.Validate(func(flag, format string, args ...any) {
				got = append(got, "--"+flag+": "+fmt.Sprintf(format, args...))
			})
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("got %q; want %q", got, tc.want)
			}
		})
	}
}

// The server re-reads its client CAs: once the CA that signed a client is
// rotated out of --tls-client-ca-file, that client's next connection is
// refused, even one offering a session ticket from before the rotation
// (crypto/tls checks a resumed session against the ClientCAs of the
// handshake, which GetConfigForClient gives afresh).
func TestClientCARotatedAwayRefusesResumedSessions(t *testing.T) {
	p := newPKI(t)
	clientCA := filepath.Join(t.TempDir(), "client-ca.crt")
	tlstest.WriteFile(t, clientCA, p.ca.PEM)
	addr, _ := serve(t, tlsconfig.Options{CertFile: p.certFile, KeyFile: p.keyFile, ClientCAFile: clientCA, CheckInterval: time.Nanosecond}, nil)
	cfg := newClient(t, tlsconfig.Options{CAFile: p.caFile, ClientCertFile: p.clientCert, ClientKeyFile: p.clientKey}).Config()
	cfg.NextProtos = []string{"h2"}
	cfg.ClientSessionCache = tls.NewLRUClientSessionCache(4)
	dial := func() (resumed bool, err error) {
		conn, err := tls.Dial("tcp", addr, cfg)
		if err != nil {
			return false, err
		}
		defer conn.Close()
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		// The server's HTTP/2 settings arrive after any session ticket.
		if _, err := conn.Read(make([]byte, 1)); err != nil {
			return false, err
		}
		return conn.ConnectionState().DidResume, nil
	}
	if _, err := dial(); err != nil {
		t.Fatalf("first connection: %v", err)
	}
	tlstest.WriteFile(t, clientCA, tlstest.NewCA(t, "new client CA").PEM)
	resumed, err := dial()
	if err == nil || !strings.Contains(err.Error(), "tls:") {
		t.Fatalf("after the client CA was rotated away: resumed=%v err=%v; want a TLS refusal", resumed, err)
	}
}

// TestHTTPSDialVerifiesThePeerAgainstThePrivateCA: an HTTPS client whose
// dial is Client.DialTLSContext (the gateway forwarding to the replica
// holding a session) reaches a server with a certificate of the configured
// CA, presenting its client certificate; a client trusting another CA is
// refused, whatever the system roots hold.
func TestHTTPSDialVerifiesThePeerAgainstThePrivateCA(t *testing.T) {
	p := newPKI(t)
	srvTLS, err := tlsconfig.NewServer(tlsconfig.Options{CertFile: p.certFile, KeyFile: p.keyFile, ClientCAFile: p.caFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			http.Error(w, "no client certificate", http.StatusForbidden)
			return
		}
		_, _ = io.WriteString(w, r.TLS.PeerCertificates[0].Subject.CommonName)
	}), TLSConfig: srvTLS.Config(true, "http/1.1"), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.ServeTLS(lis, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	get := func(c *tlsconfig.Client) (string, error) {
		tr := &http.Transport{DialTLSContext: c.DialTLSContext}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://" + lis.Addr().String() + "/")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	got, err := get(newClient(t, tlsconfig.Options{CAFile: p.caFile, ClientCertFile: p.clientCert, ClientKeyFile: p.clientKey}))
	if err != nil || got != "client" {
		t.Fatalf("peer with the private CA: %q %v", got, err)
	}
	other := tlstest.NewCA(t, "other CA").WriteCA(t, t.TempDir(), "other")
	if _, err := get(newClient(t, tlsconfig.Options{CAFile: other, ClientCertFile: p.clientCert, ClientKeyFile: p.clientKey})); err == nil ||
		!strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Fatalf("peer verified against another CA: %v", err)
	}
}

package main

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/toolcrib/toolcrib/platform/tlsconfig"
	"github.com/toolcrib/toolcrib/platform/tlsconfig/tlstest"
)

func TestRunRefusesNonLoopbackAddresses(t *testing.T) {
	for _, args := range [][]string{
		{"-listen", "0.0.0.0:0", "-admin-listen", ""},
		{"-listen", "127.0.0.1:0", "-admin-listen", "0.0.0.0:0"},
	} {
		err := run(context.Background(), args, slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("run %v = %v, want a loopback refusal", args, err)
		}
	}
}

// leaseCheck makes one health call to addr with creds.
func leaseCheck(t *testing.T, addr string, creds credentials.TransportCredentials) error {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

// The lease client of -require-lease speaks TLS with the CA and client
// certificate to a lease service that requires one (as `dev up` runs it);
// -lease-plaintext is refused there; without the default CA file it falls
// back to plaintext with a warning, and a CA file named but missing is an
// error.
func TestLeaseClientSpeaksTLSWithTheDevFiles(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "dev CA")
	caFile := ca.WriteCA(t, dir, "ca")
	certFile, keyFile := ca.Issue(t, tlstest.Leaf{CommonName: "lease", Server: true}).Write(t, dir, "lease")
	clientCert, clientKey := ca.Issue(t, tlstest.Leaf{CommonName: "client"}).Write(t, dir, "client")
	srvTLS, err := tlsconfig.NewServer(tlsconfig.Options{CertFile: certFile, KeyFile: keyFile, ClientCAFile: caFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(srvTLS.GRPC()))
	healthpb.RegisterHealthServer(g, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	addr := lis.Addr().String()

	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	creds, err := leaseTransport(caFile, clientCert, clientKey, false, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := leaseCheck(t, addr, creds); err != nil {
		t.Fatalf("TLS with the CA and client certificate: %v", err)
	}
	creds, err = leaseTransport(caFile, clientCert, clientKey, true, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := leaseCheck(t, addr, creds); status.Code(err) != codes.Unavailable {
		t.Fatalf("-lease-plaintext against TLS: %v; want UNAVAILABLE", err)
	}
	if !strings.Contains(logs.String(), "calling the lease service in plaintext (-lease-plaintext)") {
		t.Fatalf("no warning for -lease-plaintext:\n%s", logs.String())
	}

	t.Chdir(t.TempDir()) // no .toolcrib/dev/ca.pem here
	logs.Reset()
	creds, err = leaseTransport(devCAFile, clientCert, clientKey, false, log)
	if err != nil || creds.Info().SecurityProtocol != "insecure" {
		t.Fatalf("without the default CA file: %v, %v; want plaintext", creds, err)
	}
	if !strings.Contains(logs.String(), "calling the lease service in plaintext: no .toolcrib/dev/ca.pem") {
		t.Fatalf("no warning for the missing default CA:\n%s", logs.String())
	}
	if _, err := leaseTransport(filepath.Join(dir, "missing.pem"), clientCert, clientKey, false, log); err == nil ||
		!strings.Contains(err.Error(), "--tls-ca-file") {
		t.Fatalf("a named CA file that is missing: %v; want an error", err)
	}
}

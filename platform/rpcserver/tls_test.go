package rpcserver

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/toolcrib/toolcrib/platform/tlsconfig"
	"github.com/toolcrib/toolcrib/platform/tlsconfig/tlstest"
)

// With Options.TLS the gRPC listener is mTLS (a plaintext client and a
// client without a certificate are refused) and, with MetricsTLS, /metrics
// is served over TLS with the same client-certificate requirement.
func TestTLSListeners(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "test CA")
	caFile := ca.WriteCA(t, dir, "ca")
	cert, key := ca.Issue(t, tlstest.Leaf{CommonName: "server", Server: true}).Write(t, dir, "server")
	ccert, ckey := ca.Issue(t, tlstest.Leaf{CommonName: "prometheus"}).Write(t, dir, "client")
	server, err := tlsconfig.NewServer(tlsconfig.Options{CertFile: cert, KeyFile: key, ClientCAFile: caFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	client, err := tlsconfig.NewClient(tlsconfig.Options{CAFile: caFile, ClientCertFile: ccert, ClientKeyFile: ckey}, nil)
	if err != nil {
		t.Fatal(err)
	}
	anonymous, err := tlsconfig.NewClient(tlsconfig.Options{CAFile: caFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := New(Options{Service: "test", ListenAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0",
		TLS: server, MetricsTLS: true, CheckInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()

	health := func(opt grpc.DialOption) error {
		conn, err := grpc.NewClient(srv.Addr().String(), opt)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		_, err = healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{})
		return err
	}
	if err := health(grpc.WithTransportCredentials(client.TransportCredentials())); err != nil {
		t.Fatalf("mTLS client: %v", err)
	}
	if err := health(grpc.WithTransportCredentials(insecure.NewCredentials())); status.Code(err) != codes.Unavailable {
		t.Fatalf("plaintext client: %v; want UNAVAILABLE", err)
	}
	if err := health(grpc.WithTransportCredentials(anonymous.TransportCredentials())); status.Code(err) != codes.Unavailable {
		t.Fatalf("client without a certificate: %v; want UNAVAILABLE", err)
	}

	metrics := func(c *http.Client, scheme string) (string, error) {
		resp, err := c.Get(scheme + srv.MetricsAddr().String() + "/metrics")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	body, err := metrics(&http.Client{Transport: &http.Transport{TLSClientConfig: client.Config()}}, "https://")
	if err != nil || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("metrics over mTLS: %v\n%.200s", err, body)
	}
	// net/http answers a plain request on a TLS port with a 400 and no
	// metrics.
	if body, err := metrics(http.DefaultClient, "http://"); err == nil && strings.Contains(body, "go_goroutines") {
		t.Fatal("metrics answered plain HTTP")
	}
	// Without a client certificate nothing is served. Under TLS 1.3 the
	// client's handshake completes before the server checks the
	// certificate; the server's certificate-required alert then races the
	// client's request, and when the server closes first the client sees
	// the connection reset or closed instead (CI saw "use of closed network
	// connection" once). Any of those is the refusal; an answer, or
	// another error (the server's certificate refused), is not.
	_, err = metrics(&http.Client{Transport: &http.Transport{TLSClientConfig: anonymous.Config()}}, "https://")
	refused := err != nil && slices.ContainsFunc([]string{"certificate required", "connection reset", "use of closed network connection", "broken pipe", "EOF"},
		func(s string) bool { return strings.Contains(err.Error(), s) })
	if !refused {
		t.Fatalf("metrics without a client certificate: %v; want the certificate-required alert (or the connection it closed)", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	if _, err := New(Options{Service: "test", ListenAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", MetricsTLS: true}); err == nil {
		t.Fatal("metrics TLS without a certificate accepted")
	}
}

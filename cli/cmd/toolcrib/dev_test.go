package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/platform/config"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/redistest"
)

// devVerifier verifies tokens as a service started by `dev up` with its
// default configuration does.
func devVerifier(t *testing.T) *principal.Verifier {
	t.Helper()
	v, err := principal.LoadVerifier(devDir+"/jwks.json", principal.VerifierConfig{Issuer: devIssuer, Audience: devAudience,
		PlatformTenant: config.DefaultPlatformTenant, AdminGroup: devAdminGroup, ServiceGroup: devServiceGroup})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func devToken(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), append([]string{"dev", "token"}, args...), &out, &errOut)
	return strings.TrimSpace(out.String()), err
}

// `dev token --admin` and `--service` mint tokens of the platform tenant,
// which the services' defaults take as an admin and a service; a tenant
// token with the same groups is neither, and asking for an admin token of
// another tenant is refused.
func TestDevTokensOfThePlatformTenant(t *testing.T) {
	t.Chdir(t.TempDir())
	admin, err := devToken(t, "--sub", "root", "--admin")
	if err != nil {
		t.Fatal(err)
	}
	service, err := devToken(t, "--sub", "svc", "--service")
	if err != nil {
		t.Fatal(err)
	}
	user, err := devToken(t, "--sub", "mallory", "--tenant", "tenant-a", "--groups", devAdminGroup+","+devServiceGroup)
	if err != nil {
		t.Fatal(err)
	}
	v := devVerifier(t)
	for name, tc := range map[string]struct {
		token          string
		admin, service bool
	}{"admin": {admin, true, false}, "service": {service, false, true}, "tenant user with the groups": {user, false, false}} {
		p, err := v.Verify(tc.token)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if p.Admin != tc.admin || p.Service != tc.service {
			t.Fatalf("%s: %+v", name, p)
		}
	}
	if _, err := devToken(t, "--admin", "--tenant", "tenant-a"); err == nil || !strings.Contains(err.Error(), "platform tenant") {
		t.Fatalf("an admin token of tenant-a: %v", err)
	}
}

// `dev token` with a 100-year --ttl mints a token the services refuse.
func TestDevTokenBeyondTheMaximumLifetimeIsRefused(t *testing.T) {
	t.Chdir(t.TempDir())
	tok, err := devToken(t, "--admin", "--ttl", "876000h")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := devVerifier(t).Verify(tok); err == nil || !strings.Contains(err.Error(), "exceeds the maximum") {
		t.Fatalf("a 100-year dev token verified: %v", err)
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// handedOut are the addresses freeAddr returned in this process: the
// kernel may give a port just closed to the next listen on port 0, and one
// `dev up` takes a dozen addresses at once (CI saw the registry's metrics
// and the gateway's health get the same one).
var handedOut sync.Map

// freeAddr is a loopback address with a port free a moment ago, never one
// it returned before in this process.
func freeAddr(t *testing.T) string {
	t.Helper()
	for {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := lis.Addr().String()
		lis.Close()
		if _, dup := handedOut.LoadOrStore(addr, true); !dup {
			return addr
		}
	}
}

// devUpEnv is a `dev up` running in a temporary directory on its own
// database, Redis prefix and ports.
type devUpEnv struct {
	grpcAddr, metricsAddr map[string]string
	mcpAddr, consoleAddr  string
	out, errOut, logs     syncBuffer
	done                  chan error
	cancel                context.CancelFunc
}

// startDevUp runs `dev up` with args and waits for its ready line.
func startDevUp(t *testing.T, args ...string) *devUpEnv {
	t.Helper()
	t.Chdir(t.TempDir())
	t.Setenv("TOOLCRIB_POSTGRES_URL", pgtest.NewDatabase(t))
	t.Setenv("TOOLCRIB_REDIS_ADDR", redistest.Addr())
	t.Setenv("TOOLCRIB_REDIS_PREFIX", redistest.NewPrefix(t))
	d := &devUpEnv{grpcAddr: map[string]string{}, metricsAddr: map[string]string{}, done: make(chan error, 1)}
	for _, svc := range []string{"registry", "discovery", "admission", "lease", "gateway", "console"} {
		d.grpcAddr[svc], d.metricsAddr[svc] = freeAddr(t), freeAddr(t)
		t.Setenv("TOOLCRIB_"+strings.ToUpper(svc)+"_LISTEN", d.grpcAddr[svc])
		t.Setenv("TOOLCRIB_"+strings.ToUpper(svc)+"_METRICS_LISTEN", d.metricsAddr[svc])
		if svc != "gateway" && svc != "console" {
			t.Setenv("TOOLCRIB_"+strings.ToUpper(svc)+"_ADDR", d.grpcAddr[svc])
		}
	}
	d.mcpAddr = freeAddr(t)
	t.Setenv("TOOLCRIB_GATEWAY_MCP_LISTEN", d.mcpAddr)
	d.consoleAddr = freeAddr(t)
	t.Setenv("TOOLCRIB_CONSOLE_HTTP_LISTEN", d.consoleAddr)
	devServiceLog = &d.logs
	t.Cleanup(func() { devServiceLog = nil })

	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	go func() { d.done <- run(ctx, append([]string{"dev", "up"}, args...), &d.out, &d.errOut) }()
	const ready = "toolcrib dev: all 6 services SERVING; try it from another terminal: `go run ./cli/cmd/toolcrib server list`"
	deadline := time.After(90 * time.Second)
	for !strings.Contains(d.errOut.String(), ready) {
		select {
		case err := <-d.done:
			t.Fatalf("dev up ended before every service was SERVING: %v\n%s", err, d.errOut.String())
		case <-deadline:
			t.Fatalf("no ready line within 90 s:\n%s", d.errOut.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Cleanup(func() { d.stop(t) })
	return d
}

// stop is Ctrl-C: every service stops, and dev up returns nil.
func (d *devUpEnv) stop(t *testing.T) {
	t.Helper()
	if d.cancel == nil {
		return
	}
	d.cancel()
	d.cancel = nil
	select {
	case err := <-d.done:
		if err != nil {
			t.Fatalf("dev up after Ctrl-C: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("dev up did not stop within 60 s of Ctrl-C")
	}
}

// cliRun runs the CLI in the test's directory and returns its output.
func cliRun(args ...string) (string, error) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), append([]string{"--timeout", "5s"}, args...), &out, &errOut)
	return out.String() + errOut.String(), err
}

// `dev up` migrates an empty database, starts all six services with TLS,
// prints each one's addresses (the gateway's https MCP URL among them) and,
// once every gRPC health is SERVING, one line saying how to try it; Ctrl-C
// (ctx) stops them all.
func TestDevUpPrintsEveryAddressAndHowToTryIt(t *testing.T) {
	d := startDevUp(t)
	got := d.errOut.String()
	t.Logf("dev up printed:\n%s", got)
	for _, svc := range []string{"registry", "discovery", "admission", "lease"} {
		want := fmt.Sprintf("  %-10s gRPC %s  metrics http://%s/metrics\n", svc, d.grpcAddr[svc], d.metricsAddr[svc])
		if !strings.Contains(got, want) {
			t.Errorf("no line %q in:\n%s", want, got)
		}
	}
	mcpURL := "https://" + d.mcpAddr + "/mcp"
	for _, want := range []string{
		fmt.Sprintf("  gateway    MCP %s  gRPC health %s  metrics http://%s/metrics\n", mcpURL, d.grpcAddr["gateway"], d.metricsAddr["gateway"]),
		fmt.Sprintf("  console    pages https://%s  gRPC health %s  metrics http://%s/metrics\n", d.consoleAddr, d.grpcAddr["console"], d.metricsAddr["console"]),
		"MCP clients: " + mcpURL + " with a bearer token from `toolcrib dev token`, trusting the dev CA .toolcrib/dev/ca.pem\n",
		"toolcrib dev: TLS with the dev CA .toolcrib/dev/ca.pem and one certificate per service in .toolcrib/dev (made now: CA, registry, discovery, admission, lease, gateway, console, client); mTLS between the services\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no line %q in:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "try it"); n != 1 {
		t.Errorf("%d lines say how to try it, want 1:\n%s", n, got)
	}
	if strings.Contains(d.logs.String(), "TLS is off") {
		t.Errorf("a service started by dev up says TLS is off:\n%s", d.logs.String())
	}
	d.stop(t)
}

package discoverytest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/discovery"
)

// ChildEnv names the variable that makes a test binary a discovery worker
// process (see [RunChild]); its value is a JSON [Child].
const ChildEnv = "TOOLCRIB_DISCOVERY_TEST_CHILD"

// Child is a discovery worker process for tests that kill one: the test
// binary itself, started again, running discovery.Run until it is killed.
type Child struct {
	// PostgresURL, JWKS and TokenFile come from the test's
	// servicetest.Auth.Common; RegistryAddr is the registry to read.
	PostgresURL, JWKS, TokenFile, RegistryAddr string
	// Worker names the process in run records.
	Worker string
	// Secrets resolve `env:` secret references in the child; an unknown
	// name resolves to Fallback ("" for unset).
	Secrets  map[string]string
	Fallback string
	// EnvPrefixes is the child's --secret-env-prefixes (comma-separated).
	EnvPrefixes string
	// Workers is how many scans the child runs at once; 0 means 2.
	Workers int
	// NoLinger closes each MCP session right after its commit (--linger 0),
	// as a benchmark's workers do.
	NoLinger bool
}

// RunChild, when this process was started by [StartChild], runs discovery
// until the process is killed or terminated and returns true; otherwise it
// returns false at once. Call it first in TestMain:
//
//	if discoverytest.RunChild() {
//		return
//	}
func RunChild() bool {
	raw := os.Getenv(ChildEnv)
	if raw == "" {
		return false
	}
	var c Child
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		panic(err)
	}
	cfg, err := discovery.ParseConfig(nil, func(string) (string, bool) { return "", false })
	if err != nil {
		panic(err)
	}
	cfg.ListenAddr, cfg.MetricsAddr, cfg.PostgresURL = "127.0.0.1:0", "", c.PostgresURL
	cfg.AuthJWKS, cfg.AuthIssuer, cfg.AuthAudience = c.JWKS, servicetest.Issuer, servicetest.Audience
	cfg.AdminGroup, cfg.ServiceGroup, cfg.AuthPlatformTenant = servicetest.AdminGroup, servicetest.ServiceGroup, servicetest.PlatformTenant
	cfg.ServiceTokenFile, cfg.RegistryAddr, cfg.Worker = c.TokenFile, c.RegistryAddr, c.Worker
	cfg.AdmissionAddr = "" // no admission in these tests: the guard acts on incidents only
	cfg.Listening = func(addr string) { fmt.Println(addr) }
	cfg.NoAutoScans, cfg.Workers, cfg.Migrate = true, 2, true
	if c.Workers > 0 {
		cfg.Workers = c.Workers
	}
	if c.NoLinger {
		cfg.Linger = 0
	}
	cfg.ScanTimeout, cfg.RescueAfter = 5*time.Minute, 6*time.Minute
	cfg.DependencyCheckInterval = 100 * time.Millisecond
	// Test MCP servers listen on loopback; the secrets are the parent's.
	cfg.Egress.AllowLoopback = true
	cfg.Secrets.EnvPrefixes = c.EnvPrefixes
	cfg.LookupEnv = func(k string) (string, bool) {
		if v, ok := c.Secrets[k]; ok {
			return v, true
		}
		return c.Fallback, c.Fallback != ""
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	_ = discovery.Run(ctx, cfg)
	return true
}

// StartChild starts this test binary as a discovery worker process running
// c (the test's TestMain must call [RunChild]), waits until it is SERVING,
// and returns its gRPC address and its process, which is killed when the
// test ends if it still runs.
func StartChild(t testing.TB, c Child) (string, *exec.Cmd) {
	t.Helper()
	spec, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), ChildEnv+"="+string(spec))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(out)
	if !lines.Scan() {
		t.Fatal("the child discovery process printed no address")
	}
	addr := lines.Text()
	go func() {
		for lines.Scan() {
		}
	}()
	servicetest.WaitServing(t, addr, 30*time.Second)
	return addr, cmd
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/discovery"
	"github.com/toolcrib/toolcrib/services/discovery/discoverytest"
)

// discoveryEnv is a real discovery service (its Run, on loopback, with a
// fake registry) and the CLI pointed at it with an admin token.
type discoveryEnv struct {
	t     *testing.T
	reg   *discoverytest.Registry
	addr  string
	admin string
	auth  *servicetest.Auth
}

func startDiscovery(t *testing.T, edit func(*discovery.Config)) *discoveryEnv {
	t.Helper()
	auth := servicetest.NewAuth(t)
	url := pgtest.NewDatabase(t, pgtest.Schema{Name: "discovery", Sets: discovery.Spec().Migrations})
	reg, regAddr := discoverytest.StartRegistry(t, auth)
	reg.AddTenant("tenant-a")
	cfg, err := discovery.ParseConfig(nil, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	cfg.Common = auth.Common(t, url, false, nil)
	cfg.RegistryAddr, cfg.NoAutoScans, cfg.Linger = regAddr, true, 0
	cfg.Egress.AllowLoopback = true // the MCP fixture listens on loopback
	if edit != nil {
		edit(&cfg)
	}
	addr := servicetest.Start(t, func(ctx context.Context, listening func(string)) error {
		c := cfg
		c.Listening = listening
		return discovery.Run(ctx, c)
	})
	return &discoveryEnv{t: t, reg: reg, addr: addr, admin: auth.Admin(t), auth: auth}
}

// run runs the CLI and returns its stdout, its stderr and its exit status.
func (d *discoveryEnv) run(ctx context.Context, args ...string) (string, string, int) {
	d.t.Helper()
	var out, errOut bytes.Buffer
	err := run(ctx, append([]string{"--discovery", d.addr, "--token", d.admin}, args...), &out, &errOut)
	if err != nil {
		fmt.Fprintln(&errOut, "toolcrib:", describe(err))
	}
	return out.String(), errOut.String(), exitCode(err)
}

// httpServer registers an MCP server reached over streamable HTTP at url.
func (d *discoveryEnv) httpServer(id, url string) {
	d.reg.PutServer(&registryv1.Server{ServerId: id, TrustLevel: registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY,
		RevisionSource: registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED,
		Transport:      &registryv1.Server_StreamableHttp{StreamableHttp: &registryv1.StreamableHttpTransport{Url: url}}})
}

// TestDiscoveryCommands drives the discovery commands against a real
// discovery service with a scripted MCP server over streamable HTTP.
func TestDiscoveryCommands(t *testing.T) {
	d := startDiscovery(t, nil)
	cat := discoverytest.NewCatalog("r-1", 2, discoverytest.Tools("inv", 3)...)
	mcpSrv := discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{}, false)
	d.httpServer("inventory", mcpSrv.URL)
	d.reg.PutClass(&registryv1.AudienceClass{Name: "tenant-a.readers", TenantId: "tenant-a",
		Servers: []*registryv1.AudienceServer{{ServerId: "inventory"}}})
	addr, admin := d.addr, d.admin
	cli := func(args ...string) string {
		t.Helper()
		out, errOut, code := d.run(t.Context(), args...)
		if code != 0 {
			t.Fatalf("toolcrib %s: exit %d\n%s", strings.Join(args, " "), code, errOut)
		}
		return out
	}
	contains := func(out string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Fatalf("output lacks %q:\n%s", w, out)
			}
		}
	}

	contains(cli("discovery", "scan", "--audience", "tenant-a.readers", "--wait", "inventory"), "ELIGIBLE", "inventory", "tenant-a.readers")
	cat.SetTools("r-2", discoverytest.Tools("inv", 4)...)
	contains(cli("discovery", "scan", "--wait", "inventory"), "ELIGIBLE")
	// The same catalog again proves the active generation: a success.
	contains(cli("discovery", "scan", "--wait", "inventory"), "UNCHANGED", "2 confirmed") // the generation it proved again

	runs := cli("discovery", "runs", "--server", "inventory")
	contains(runs, "RUN", "ELIGIBLE", "MANUAL")
	var listed struct {
		Runs []struct {
			RunID string `json:"runId"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(cli("--json", "discovery", "runs", "--state", "eligible")), &listed); err != nil || len(listed.Runs) != 2 {
		t.Fatalf("runs as JSON: %v %v", listed, err)
	}
	contains(cli("discovery", "run", listed.Runs[1].RunID), "state:", "ELIGIBLE", "PAGE", "2@r-1", "closing re-check r-1")

	contains(cli("discovery", "snapshot", "inventory", "tenant-a.readers"), "generation 2", "inventory.inv_3", "source revision:", "r-2")
	contains(cli("discovery", "snapshot", "--generation", "1", "--raw", "inventory", "tenant-a.readers"), "RETIRED", `"name":"inv_0"`)
	contains(cli("discovery", "generations", "inventory", "tenant-a.readers"), "GEN", "r-2", "RETIRED")

	contains(cli("discovery", "rollback", "--expected", "2", "--reason", "cli test", "inventory", "tenant-a.readers"),
		"ACTIVE at generation 1 (was 2)", "ROLLBACK")
	contains(cli("discovery", "snapshot", "inventory", "tenant-a.readers"), "generation 1")

	// close: --reason and --expected are required; a stale --expected is
	// refused with the pointer untouched; then the pointer is CLOSED.
	if _, errOut, code := d.run(t.Context(), "discovery", "close", "--expected", "1", "inventory", "tenant-a.readers"); code == 0 || !strings.Contains(errOut, "--reason is required") {
		t.Fatalf("close without --reason: exit %d %s", code, errOut)
	}
	if _, errOut, code := d.run(t.Context(), "discovery", "close", "--expected", "2", "--reason", "stale", "inventory", "tenant-a.readers"); code != 1 || !strings.Contains(errOut, "Aborted: the pointer is not at expected_generation") {
		t.Fatalf("close with a stale --expected: exit %d %s", code, errOut)
	}
	contains(cli("discovery", "close", "--expected", "1", "--reason", "cli close", "inventory", "tenant-a.readers"),
		"CLOSED at generation 1", "CLOSE")

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	if err := run(ctx, []string{"--discovery", addr, "--token", admin, "discovery", "watch"}, &out, &errOut); err != nil {
		t.Fatalf("watch: %v %s", err, errOut.String())
	}
	contains(out.String(), "ACTIVATE", "ROLLBACK", "CLOSE", "inventory/tenant-a.readers")

	var bad bytes.Buffer
	if err := run(t.Context(), []string{"--discovery", addr, "--token", admin, "discovery", "rollback", "inventory", "tenant-a.readers"}, &bad, &bad); err == nil {
		t.Fatal("rollback without --expected succeeded")
	}
}

// A scan whose attempts keep failing: `scan --wait` returns when the
// attempt it queued ended (not after the retries, which back off for an
// hour here), prints the run, says why and that retries continue, and exits
// 1. A server no audience class covers is refused with exit 1 rather than
// an empty table.
func TestDiscoveryScanWaitFailing(t *testing.T) {
	d := startDiscovery(t, func(c *discovery.Config) { c.RetryBase, c.RetryMax = time.Hour, time.Hour })
	// Nothing listens on a reserved loopback port: every connect is refused.
	d.httpServer("down", "http://"+closedAddr(t)+"/mcp")
	d.httpServer("lonely", "http://"+closedAddr(t)+"/mcp")
	d.reg.PutClass(&registryv1.AudienceClass{Name: "tenant-a.readers", TenantId: "tenant-a",
		Servers: []*registryv1.AudienceServer{{ServerId: "down"}}})

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, errOut, code := d.run(ctx, "discovery", "scan", "--wait", "down")
	if code != 1 || ctx.Err() != nil {
		t.Fatalf("scan --wait of a failing server: exit %d (ctx %v)\nstdout:\n%s\nstderr:\n%s", code, ctx.Err(), out, errOut)
	}
	for _, w := range []string{"down", "tenant-a.readers", "INCOMPLETE", "TRANSPORT_ERROR"} {
		if !strings.Contains(out, w) {
			t.Errorf("stdout lacks %q:\n%s", w, out)
		}
	}
	for _, w := range []string{"attempt 1 of scan", "ended INCOMPLETE (TRANSPORT_ERROR)", "retries continue",
		"toolcrib: the scan did not activate a catalog (1 of 1)"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errOut)
		}
	}

	// Asked again while the scan waits an hour for its retry: the ticket is
	// the queued scan, the trigger makes its retry due now, and the answer
	// is that attempt (2), not the one that ended before.
	short, cancelShort := context.WithTimeout(ctx, 30*time.Second)
	defer cancelShort()
	out, errOut, code = d.run(short, "--json", "discovery", "scan", "--wait", "down")
	if code != 1 || !strings.Contains(errOut, "attempt 2 of scan") || !strings.Contains(errOut, "retries continue") {
		t.Fatalf("second wait: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	var waited struct {
		Runs []struct {
			Attempt int    `json:"attempt"`
			State   string `json:"state"`
			Reason  string `json:"reason"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &waited); err != nil || len(waited.Runs) != 1 || waited.Runs[0].Attempt != 2 ||
		waited.Runs[0].State != "DISCOVERY_STATE_INCOMPLETE" || waited.Runs[0].Reason != "RUN_REASON_TRANSPORT_ERROR" {
		t.Fatalf("second wait, JSON (%v):\n%s", err, out)
	}

	for _, args := range [][]string{{"discovery", "scan", "lonely"}, {"discovery", "scan", "--wait", "lonely"}} {
		out, errOut, code := d.run(ctx, args...)
		if code != 1 || !strings.Contains(errOut, "no audience class covers server lonely: nothing was scanned") {
			t.Fatalf("toolcrib %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
		}
		if out != "" {
			t.Fatalf("toolcrib %s printed a table for nothing:\n%s", strings.Join(args, " "), out)
		}
	}
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// racedDiscovery stands between the CLI and a real discovery service. Its
// first TriggerScan answers with the ticket of a scan whose only attempt
// already ended (as the service does when the queue has not yet recorded
// that scan's end: `already_queued` with the old scan's id); every later
// TriggerScan is forwarded and counted, as is every ListRuns.
type racedDiscovery struct {
	discoveryv1.UnimplementedDiscoveryServiceServer
	real      discoveryv1.DiscoveryServiceClient
	stale     *discoveryv1.ScanTicket
	triggers  atomic.Int32
	forwarded atomic.Int32
}

func (p *racedDiscovery) TriggerScan(ctx context.Context, req *discoveryv1.TriggerScanRequest) (*discoveryv1.TriggerScanResponse, error) {
	if p.triggers.Add(1) == 1 {
		return &discoveryv1.TriggerScanResponse{Scans: []*discoveryv1.ScanTicket{p.stale}}, nil
	}
	p.forwarded.Add(1)
	return p.real.TriggerScan(ctx, req)
}

func (p *racedDiscovery) ListRuns(ctx context.Context, req *discoveryv1.ListRunsRequest) (*discoveryv1.ListRunsResponse, error) {
	return p.real.ListRuns(ctx, req)
}

// Issue 20 point 6: `scan --wait` on a server whose queued scan had just
// ended QUARANTINED, with the scans of 15 other servers queued, triggers
// once and reports that attempt. It made a new scan every second for ten
// seconds (it waited for a new attempt of the old scan, which never comes,
// while each trigger made a new scan).
func TestDiscoveryScanWaitTriggersOnceAfterAFinalState(t *testing.T) {
	d := startDiscovery(t, func(c *discovery.Config) { c.Workers = 2 })
	dup := []json.RawMessage{discoverytest.Tool("a"), discoverytest.Tool("a")}
	bad := discoverytest.NewHTTP(t, discoverytest.NewCatalog("r-1", 1, dup...), discoverytest.ServerOptions{}, false)
	good := discoverytest.NewHTTP(t, discoverytest.NewCatalog("r-1", 1, discoverytest.Tools("t", 3)...), discoverytest.ServerOptions{}, false)
	d.httpServer("dup", bad.URL)
	servers := []*registryv1.AudienceServer{{ServerId: "dup"}}
	for i := range 15 {
		id := fmt.Sprintf("other-%02d", i)
		d.httpServer(id, good.URL)
		servers = append(servers, &registryv1.AudienceServer{ServerId: id})
	}
	d.reg.PutClass(&registryv1.AudienceClass{Name: "tenant-a.readers", TenantId: "tenant-a", Servers: servers})

	conn, err := grpc.NewClient(d.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(principal.BearerToken(d.admin)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	real := discoveryv1.NewDiscoveryServiceClient(conn)
	first, err := real.TriggerScan(t.Context(), &discoveryv1.TriggerScanRequest{ServerId: "dup"})
	if err != nil || len(first.GetScans()) != 1 {
		t.Fatalf("first scan: %v %v", first, err)
	}
	ended, err := discovery.WaitScan(t.Context(), real, first.GetScans()[0].GetScanId(), nil)
	if err != nil || ended.GetState() != catalogv1.DiscoveryState_DISCOVERY_STATE_QUARANTINED {
		t.Fatalf("first scan: %v %v", ended, err)
	}
	// The other servers' scans fill the queue while the CLI waits.
	for i := range 15 {
		if _, err := real.TriggerScan(t.Context(), &discoveryv1.TriggerScanRequest{ServerId: fmt.Sprintf("other-%02d", i)}); err != nil {
			t.Fatal(err)
		}
	}

	stale := proto.Clone(first.GetScans()[0]).(*discoveryv1.ScanTicket)
	stale.AlreadyQueued = true
	proxy := &racedDiscovery{real: real, stale: stale}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	discoveryv1.RegisterDiscoveryServiceServer(srv, proxy)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	err = run(ctx, []string{"--discovery", l.Addr().String(), "--token", d.admin, "discovery", "scan", "--wait", "dup"}, &out, &errOut)
	if n := proxy.triggers.Load(); n != 1 {
		t.Fatalf("scan --wait called TriggerScan %d times, want 1 (%d new scans asked for)", n, proxy.forwarded.Load())
	}
	if code := exitCode(err); code != 1 || !strings.Contains(errOut.String(), "ended QUARANTINED (DUPLICATE_TOOL_NAME)") ||
		!strings.Contains(errOut.String(), "not retried") || !strings.Contains(out.String(), ended.GetRunId()) {
		t.Fatalf("scan --wait: exit %d (%v)\nstdout:\n%s\nstderr:\n%s", code, err, out.String(), errOut.String())
	}
	runs, err := real.ListRuns(t.Context(), &discoveryv1.ListRunsRequest{ServerId: "dup"})
	if err != nil || len(runs.GetRuns()) != 1 {
		t.Fatalf("runs of dup: %d (%v), want the first scan's only", len(runs.GetRuns()), err)
	}
}

package gateway_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/e2e/gatewayworld"
	"github.com/toolcrib/toolcrib/e2e/inventory"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/servicetest"
)

// TestGatewayCallsAStdioServer: a stdio MCP server (the example server,
// `-stdio -require-lease`) registered beside the HTTP one and crawled by
// discovery over stdio. Through the gateway its reviewed tool is listed
// and called: the gateway starts the registered command (the identity
// discovery pinned), sends the call with a lease and proof in `_meta`, and
// the server's executor kit runs it only with them; a second call reuses
// the process. A command changed in the registry after the catalog was
// proven is not started (UPSTREAM_IDENTITY_MISMATCH).
func TestGatewayCallsAStdioServer(t *testing.T) {
	w := gatewayworld.Start(t, gatewayworld.Options{})
	ctx := ctxFor(t)
	bin, tokenFile, _ := buildExampleServer(t, w)
	const server = "stdinv"
	args := []string{"-stdio", "-admin-listen", "", "-require-lease", "-lease-addr", w.LeaseAddr,
		"-lease-audience", "executor." + server, "-server-id", server, "-lease-token-file", tokenFile}
	reg := w.St.Registry
	srv := reviewStdioServer(t, w, server, &registryv1.StdioTransport{Command: bin, Args: args})
	cs := gatewayworld.Connect(t, w.GatewayURL, w.Token(t, "alice", gatewayworld.TenantA), nil)
	servicetest.Eventually(t, 30*time.Second, "alice lists the stdio server's tool", func() bool {
		names, _ := listAll(t, cs)
		return slices.Contains(names, "inventory.lookup")
	})
	for i := range 2 {
		res := call(t, cs, "inventory.lookup", map[string]any{"sku": "SKU-100"})
		if res.IsError || !strings.Contains(text(res), `"on_hand":40`) {
			t.Fatalf("call %d of the stdio server's tool: %s %v", i+1, text(res), res.Meta)
		}
	}

	// The registered command changes (an owner's update) after the catalog
	// was proven from the pinned one: the gateway starts nothing new.
	moved := append(slices.Clone(args), "-page-size", "3")
	if _, err := reg.UpdateServer(ctx, &registryv1.UpdateServerRequest{Server: &registryv1.Server{
		ServerId: server, Owner: gatewayworld.TenantA + "/group:inventory-team",
		Transport:      &registryv1.Server_Stdio{Stdio: &registryv1.StdioTransport{Command: bin, Args: moved}},
		TrustLevel:     registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY,
		RevisionSource: registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED,
		ScanInterval:   durationpb.New(time.Hour), IdentityPin: srv.GetServer().GetIdentityPin(),
	}, ExpectedVersion: srv.GetServer().GetVersion()}); err != nil {
		t.Fatal(err)
	}
	// The gateway re-reads an endpoint at most every 30 s; a replica
	// started now reads it afresh.
	url2 := w.StartGateway(t, w.AdmissionAddr, w.LeaseAddr, nil)
	cs2 := gatewayworld.Connect(t, url2, w.Token(t, "alice", gatewayworld.TenantA), nil)
	listAll(t, cs2)
	if res := call(t, cs2, "inventory.lookup", map[string]any{"sku": "SKU-100"}); !res.IsError || reason(res) != "UPSTREAM_IDENTITY_MISMATCH" {
		t.Fatalf("a changed stdio command: %s %v", text(res), res.Meta)
	}
}

// Issue 20.8: a stdio server is pinned to the code its command line runs.
// The example server is started as `sh server.sh -stdio …` (an interpreter
// and a script, as `node server.js` is) with its package directory pinned.
// Behind the same registered command line, a changed file of the pinned
// directory (seen within the gateway's one-second reuse of a tree digest)
// and then a rewritten script (seen on the next call) are each refused
// UPSTREAM_IDENTITY_MISMATCH by the same gateway replica, no lease being
// issued; the same content again is served again; and discovery
// quarantines a scan of the changed code, so its catalog never replaces
// the one proven from the pinned code.
func TestGatewayRefusesAStdioServerWhoseCodeChanged(t *testing.T) {
	w := gatewayworld.Start(t, gatewayworld.Options{})
	ctx := ctxFor(t)
	bin, tokenFile, dir := buildExampleServer(t, w)
	pkg := filepath.Join(dir, "pkg")
	script, data := filepath.Join(pkg, "server.sh"), filepath.Join(pkg, "lib", "data.txt")
	write := func(path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	scriptV1 := "#!/bin/sh\nexec " + strconv.Quote(bin) + ` "$@"` + "\n"
	write(script, scriptV1)
	write(data, "v1\n")
	const server = "shinv"
	args := []string{script, "-stdio", "-admin-listen", "", "-require-lease", "-lease-addr", w.LeaseAddr,
		"-lease-audience", "executor." + server, "-server-id", server, "-lease-token-file", tokenFile}
	reviewStdioServer(t, w, server, &registryv1.StdioTransport{Command: "sh", Args: args, PinDir: pkg})

	cs := gatewayworld.Connect(t, w.GatewayURL, w.Token(t, "alice", gatewayworld.TenantA), nil)
	servicetest.Eventually(t, 30*time.Second, "alice lists the stdio server's tool", func() bool {
		names, _ := listAll(t, cs)
		return slices.Contains(names, "inventory.lookup")
	})
	served := func(what string) {
		t.Helper()
		if res := call(t, cs, "inventory.lookup", map[string]any{"sku": "SKU-100"}); res.IsError || !strings.Contains(text(res), `"on_hand":40`) {
			t.Fatalf("%s: %s %v", what, text(res), res.Meta)
		}
	}
	refused := func(what string) {
		t.Helper()
		res := call(t, cs, "inventory.lookup", map[string]any{"sku": "SKU-100"})
		if !res.IsError || reason(res) != "UPSTREAM_IDENTITY_MISMATCH" {
			t.Fatalf("%s: %s %v", what, text(res), res.Meta)
		}
		if _, ok := res.Meta["dev.toolcrib/execution-receipt"]; ok {
			t.Fatalf("%s: a lease was issued: %v", what, res.Meta)
		}
	}
	served("the pinned code")
	// A call reuses the pinned directory's tree digest for up to a second
	// (the executable and the script are checked on every call).
	const treeMaxAge = time.Second
	write(data, "v2\n")
	time.Sleep(treeMaxAge + 100*time.Millisecond)
	refused("a file of the pinned directory changed")
	write(data, "v1\n")
	time.Sleep(treeMaxAge + 100*time.Millisecond)
	served("the pinned code again")
	write(script, scriptV1+"# updated\n")
	refused("the script changed")

	// Discovery sees the changed identity: the scan is quarantined and the
	// active catalog is still the one proven from the pinned code.
	before, err := w.St.Discovery.GetActiveSnapshot(ctx, &discoveryv1.GetActiveSnapshotRequest{ServerId: server, AudienceClass: gatewayworld.ClassA})
	if err != nil {
		t.Fatal(err)
	}
	tk, err := w.St.Discovery.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: server, AudienceClass: gatewayworld.ClassA})
	if err != nil {
		t.Fatal(err)
	}
	var run *discoveryv1.Run
	servicetest.Eventually(t, 30*time.Second, "the rescan of the changed code ends", func() bool {
		runs, err := w.St.Discovery.ListRuns(ctx, &discoveryv1.ListRunsRequest{ScanId: tk.GetScans()[0].GetScanId()})
		if err != nil || len(runs.GetRuns()) == 0 {
			return false
		}
		run = runs.GetRuns()[0]
		switch run.GetState() {
		case catalogv1.DiscoveryState_DISCOVERY_STATE_UNSPECIFIED, catalogv1.DiscoveryState_DISCOVERY_STATE_DISCOVERING,
			catalogv1.DiscoveryState_DISCOVERY_STATE_VALIDATING:
			return false
		}
		return true
	})
	if run.GetState() != catalogv1.DiscoveryState_DISCOVERY_STATE_QUARANTINED || run.GetReason() != discoveryv1.RunReason_RUN_REASON_IDENTITY_MISMATCH {
		t.Fatalf("the rescan of the changed code: %v %v (%s)", run.GetState(), run.GetReason(), run.GetDetail())
	}
	after, err := w.St.Discovery.GetActiveSnapshot(ctx, &discoveryv1.GetActiveSnapshotRequest{ServerId: server, AudienceClass: gatewayworld.ClassA})
	if err != nil || after.GetPointer().GetGeneration() != before.GetPointer().GetGeneration() {
		t.Fatalf("the active generation moved: %v %v", after.GetPointer(), err)
	}
}

// buildExampleServer builds the example MCP server into a temporary
// directory and writes a service token for its lease verification there;
// it returns the binary, the token file and the directory.
func buildExampleServer(t *testing.T, w *gatewayworld.World) (bin, tokenFile, dir string) {
	t.Helper()
	dir = t.TempDir()
	bin = filepath.Join(dir, "exampleserver")
	build := exec.Command("go", "build", "-o", bin, "../cmd/exampleserver")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build exampleserver: %v\n%s", err, out)
	}
	tokenFile = filepath.Join(dir, "service-token")
	if err := os.WriteFile(tokenFile, []byte(w.St.Auth.Service(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	return bin, tokenFile, dir
}

// reviewStdioServer registers a stdio server in tenant A's class, scans it
// until its catalog is active (discovery pins its identity), and publishes,
// approves and enables its inventory.lookup; it returns the server as
// pinned.
func reviewStdioServer(t *testing.T, w *gatewayworld.World, server string, tr *registryv1.StdioTransport) *registryv1.GetServerResponse {
	t.Helper()
	ctx := ctxFor(t)
	reg := w.St.Registry
	if _, err := reg.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: &registryv1.Server{
		ServerId: server, Owner: gatewayworld.TenantA + "/group:inventory-team",
		Transport:      &registryv1.Server_Stdio{Stdio: tr},
		TrustLevel:     registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY,
		RevisionSource: registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED,
		ScanInterval:   durationpb.New(time.Hour),
	}}); err != nil {
		t.Fatal(err)
	}
	cls, err := reg.GetAudienceClass(ctx, &registryv1.GetAudienceClassRequest{Name: gatewayworld.ClassA})
	if err != nil {
		t.Fatal(err)
	}
	ac := cls.GetAudienceClass()
	ac.Servers = append(ac.Servers, &registryv1.AudienceServer{ServerId: server})
	if _, err := reg.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: ac, ExpectedVersion: ac.GetVersion()}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.St.Discovery.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: server, AudienceClass: gatewayworld.ClassA}); err != nil {
		t.Fatal(err)
	}
	gatewayworld.WaitActive(t, ctx, w.St.Discovery, server, gatewayworld.ClassA)
	srv, err := reg.GetServer(ctx, &registryv1.GetServerRequest{ServerId: server})
	if err != nil || srv.GetServer().GetIdentityPin() == "" {
		t.Fatalf("discovery pinned no identity for the stdio server: %v %v", srv, err)
	}
	tool := server + ".inventory.lookup"
	servicetest.Eventually(t, 30*time.Second, "the registry learns the stdio server's tools", func() bool {
		_, err := reg.GetTool(ctx, &registryv1.GetToolRequest{ToolId: tool})
		return err == nil
	})
	pub, err := reg.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: &registryv1.ToolContract{
		ToolId: tool, Effect: catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY, Scope: "shipment:read",
		Authorization: registryv1.Authorization_AUTHORIZATION_CALLER_AND_TENANT,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: tool, ApprovalDigest: pub.GetTool().GetApprovalDigest()}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.EnableTool(ctx, &registryv1.EnableToolRequest{ToolId: tool}); err != nil {
		t.Fatal(err)
	}
	return srv
}

// TestGatewayRelaysAStdioServersQuestion: a stdio server whose tool asks
// its client a question (the example server with -ask-dock). A
// 2025-11-25 client that declared elicitation gets a process of the server
// of its own session's, so the question reaches it, named as from the
// server and tool, and its answer reaches the server; while two of its
// calls are in flight the server's pipe cannot say which asked, so the
// second question is refused (the server answers without a dock) rather
// than guessed. A client that declared nothing, and a stateless
// (2026-07-28) one, share one process, which is asked nothing.
func TestGatewayRelaysAStdioServersQuestion(t *testing.T) {
	w := gatewayworld.Start(t, gatewayworld.Options{})
	bin, tokenFile, _ := buildExampleServer(t, w)
	const server = "stdask"
	args := []string{"-stdio", "-ask-dock", "-admin-listen", "", "-require-lease", "-lease-addr", w.LeaseAddr,
		"-lease-audience", "executor." + server, "-server-id", server, "-lease-token-file", tokenFile}
	reviewStdioServer(t, w, server, &registryv1.StdioTransport{Command: bin, Args: args})
	alice := w.Token(t, "alice", gatewayworld.TenantA)
	var (
		mu    sync.Mutex
		asked []string
	)
	first, release := make(chan struct{}, 1), make(chan struct{})
	elicit := func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		mu.Lock()
		asked = append(asked, req.Params.Message)
		n := len(asked)
		mu.Unlock()
		if n == 2 { // the first question of the concurrent pair: held
			first <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"dock": "D7"}}, nil
	}
	cs := gatewayworld.ConnectAt(t, w.GatewayURL, alice, &mcp.ClientOptions{ElicitationHandler: elicit}, "2025-11-25")
	servicetest.Eventually(t, 30*time.Second, "alice lists the stdio server's tool", func() bool {
		names, _ := listAll(t, cs)
		return slices.Contains(names, "inventory.lookup")
	})
	lookup := func(cs *mcp.ClientSession, sku string) []string {
		t.Helper()
		res := call(t, cs, "inventory.lookup", map[string]any{"sku": sku})
		if res.IsError || len(res.Content) == 0 || !strings.Contains(text(res), `"sku":"`+sku+`"`) {
			t.Fatalf("lookup of %s: %s %v", sku, text(res), res.Meta)
		}
		var out []string
		for _, c := range res.Content[1:] {
			if tc, ok := c.(*mcp.TextContent); ok {
				out = append(out, tc.Text)
			}
		}
		return out
	}
	if got := lookup(cs, "SKU-100"); !slices.Equal(got, []string{"dock: D7"}) {
		t.Fatalf("a client that can be asked: %q, want its answer", got)
	}
	mu.Lock()
	want := "[server " + server + ", tool inventory.lookup] " + inventory.AskDockQuestion + " (SKU-100)"
	if len(asked) != 1 || asked[0] != want {
		t.Fatalf("the client was asked %q, want %q", asked, want)
	}
	mu.Unlock()

	// Two calls in flight: the first one's question is held at the client;
	// the second one's cannot be told from it.
	held := make(chan []string, 1)
	go func() { held <- lookup(cs, "SKU-200") }()
	select {
	case <-first:
	case <-time.After(30 * time.Second):
		t.Fatal("the first question of the pair never reached the client")
	}
	if got := lookup(cs, "SKU-300"); len(got) != 1 || !strings.HasPrefix(got[0], "dock: (not asked") {
		t.Fatalf("a question asked while two calls were in flight: %q, want it refused", got)
	}
	close(release)
	if got := <-held; !slices.Equal(got, []string{"dock: D7"}) {
		t.Fatalf("the held call: %q, want its answer", got)
	}
	mu.Lock()
	if len(asked) != 2 {
		t.Fatalf("the client was asked %d questions, want 2 (the refused one never reached it)", len(asked))
	}
	mu.Unlock()

	for _, c := range []*mcp.ClientSession{
		gatewayworld.ConnectAt(t, w.GatewayURL, alice, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}, "2025-11-25"),
		gatewayworld.ConnectAt(t, w.GatewayURL, alice, nil, "2026-07-28"),
	} {
		listAll(t, c)
		if got := lookup(c, "SKU-100"); len(got) != 0 {
			t.Fatalf("a client that cannot be asked: %q, want no question asked", got)
		}
	}
}

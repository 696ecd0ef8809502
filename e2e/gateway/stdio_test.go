package gateway_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolcrib/toolcrib/e2e/gatewayworld"
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
	dir := t.TempDir()
	bin := filepath.Join(dir, "exampleserver")
	build := exec.Command("go", "build", "-o", bin, "../cmd/exampleserver")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build exampleserver: %v\n%s", err, out)
	}
	tokenFile := filepath.Join(dir, "service-token")
	if err := os.WriteFile(tokenFile, []byte(w.St.Auth.Service(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	const server = "stdinv"
	args := []string{"-stdio", "-admin-listen", "", "-require-lease", "-lease-addr", w.LeaseAddr,
		"-lease-audience", "executor." + server, "-server-id", server, "-lease-token-file", tokenFile}
	reg := w.St.Registry
	if _, err := reg.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: &registryv1.Server{
		ServerId: server, Owner: gatewayworld.TenantA + "/group:inventory-team",
		Transport:      &registryv1.Server_Stdio{Stdio: &registryv1.StdioTransport{Command: bin, Args: args}},
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
	const tool = server + ".inventory.lookup"
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

package suite

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolcrib/toolcrib/e2e/inventory"
	"github.com/toolcrib/toolcrib/e2e/leaseworld"
	"github.com/toolcrib/toolcrib/e2e/stack"
	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/revision/lease"
	"github.com/toolcrib/toolcrib/revision/lease/executor"
	"github.com/toolcrib/toolcrib/services/discovery"
)

// startExampleServer runs the example MCP server (e2e/cmd/exampleserver's
// server) on free loopback ports with lease checks on every tools/call, as
// `make run` starts it, and returns its MCP URL.
func startExampleServer(t *testing.T, leaseOpts *executor.Options) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	urls := make(chan string, 1)
	done := make(chan error, 1)
	cfg := inventory.Config{Listen: "127.0.0.1:0", PageSize: 2, CursorKey: []byte("lease tour cursor key, 16+ bytes"), Lease: leaseOpts}
	go func() {
		done <- inventory.Serve(ctx, cfg, slog.New(slog.DiscardHandler), func(m, _ string) { urls <- m })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("example server: %v", err)
		}
	})
	select {
	case u := <-urls:
		return u
	case err := <-done:
		t.Fatalf("example server: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the example server never listened")
	}
	return ""
}

// TestLeaseTour is the README's lease tour through the real registry,
// discovery, admission, lease and the example MCP server started with the
// executor kit (-require-lease): the example server is registered, scanned
// and its shipment.status tool reviewed; admission's Check is ALLOW; a
// lease issued for that receipt runs the call on the example server; the
// same lease a second time is refused ALREADY_USED, a call without a lease
// is refused, and neither reaches the tool.
func TestLeaseTour(t *testing.T) {
	const (
		tourTool = "shipment.status" // the tool's name at the example server
		tourID   = serverID + "." + tourTool
		audience = "executor.inventory"
	)
	ctx := ctxFor(t)
	st := stack.Start(t, stack.Options{Discovery: func(c *discovery.Config) { c.Linger = 0 }})
	admAddr, leaseAddr := leaseworld.StartAdmissionAndLease(t, st, time.Minute)
	executorLease := servicetest.Dial(t, leaseAddr, st.Auth.Service(t))
	mcpURL := startExampleServer(t, inventory.LeaseOptions(executorLease, serverID, audience))

	reg := st.Registry
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(reg.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: &registryv1.Server{
		ServerId: serverID, Owner: tenant + "/group:inventory-team",
		Transport:      &registryv1.Server_StreamableHttp{StreamableHttp: &registryv1.StreamableHttpTransport{Url: mcpURL}},
		TrustLevel:     registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY,
		RevisionSource: registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED,
		ScanInterval:   durationpb.New(time.Hour),
	}}))
	must(reg.PutTenant(ctx, &registryv1.PutTenantRequest{Tenant: &registryv1.Tenant{TenantId: tenant}}))
	must(reg.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: &registryv1.AudienceClass{
		Name: class, TenantId: tenant, Servers: []*registryv1.AudienceServer{{ServerId: serverID}}}}))
	must(reg.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenant, Group: "readers",
		Scopes: []string{"inventory:read"}, AudienceClasses: []string{class}}))
	must(st.Discovery.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: serverID, AudienceClass: class}))
	if _, err := discovery.WaitPointers(ctx, st.Discovery, 0, []discovery.PointerKey{{ServerID: serverID, AudienceClass: class}}, nil); err != nil {
		t.Fatal(err)
	}
	active, err := st.Discovery.GetActiveSnapshot(ctx, &discoveryv1.GetActiveSnapshotRequest{ServerId: serverID, AudienceClass: class})
	if err != nil {
		t.Fatal(err)
	}
	tools := active.GetSnapshot().GetTools()
	i := slices.IndexFunc(tools, func(d *catalogv1.ToolDescriptor) bool { return d.GetName() == tourTool })
	if i < 0 || len(tools) != 4 {
		t.Fatalf("generation %d lists %d tools, %s at %d", active.GetPointer().GetGeneration(), len(tools), tourTool, i)
	}
	digest, generation := tools[i].GetDescriptorDigest(), active.GetPointer().GetGeneration()
	// Every tool the registry learns moves the tenant's policy epoch; the
	// tour's lease must not be issued before the last of them.
	servicetest.Eventually(t, 30*time.Second, "the registry learns the four tools", func() bool {
		for _, d := range tools {
			if _, err := reg.GetTool(ctx, &registryv1.GetToolRequest{ToolId: serverID + "." + d.GetName()}); err != nil {
				return false
			}
		}
		return true
	})
	pub, err := reg.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: &registryv1.ToolContract{
		ToolId: tourID, Effect: catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY, Scope: "inventory:read",
		Authorization: registryv1.Authorization_AUTHORIZATION_CALLER_AND_TENANT,
	}})
	if err != nil {
		t.Fatal(err)
	}
	must(reg.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: tourID, ApprovalDigest: pub.GetTool().GetApprovalDigest()}))
	must(reg.EnableTool(ctx, &registryv1.EnableToolRequest{ToolId: tourID}))

	// The epoch of the last review step (EnableTool): the lease service
	// refuses a lease from an older one (POLICY_CHANGED), so the ALLOW the
	// tour cites must be decided at it.
	pol, err := reg.GetPolicy(ctx, &registryv1.GetPolicyRequest{TenantId: tenant})
	if err != nil {
		t.Fatal(err)
	}
	epoch := pol.GetPolicy().GetPolicyEpoch()

	alice := st.Auth.User(t, "alice", tenant, "readers")
	adm := admissionv1.NewAdmissionServiceClient(servicetest.Dial(t, admAddr, alice))
	args := map[string]any{"shipment_id": "SHP-1"}
	rawArgs, _ := json.Marshal(args)
	checkReq := &admissionv1.CheckRequest{ToolId: tourID, Generation: generation, DescriptorDigest: digest,
		Arguments: rawArgs, Mode: admissionv1.Mode_MODE_AUTONOMOUS, AudienceClass: class, PolicyEpoch: epoch}

	// toolcrib visible: the reviewed, enabled tool is the one alice sees.
	servicetest.Eventually(t, 30*time.Second, "the tool in alice's visible set", func() bool {
		vis, err := adm.ListVisibleTools(ctx, &admissionv1.ListVisibleToolsRequest{})
		if err != nil {
			t.Fatalf("ListVisibleTools: %v", err)
		}
		return len(vis.GetTools()) == 1 && vis.GetTools()[0].GetRuntime().GetToolId() == tourID && vis.GetPolicyEpoch() == epoch
	})

	// toolcrib check: ALLOW, with a receipt.
	allow := func() *admissionv1.CheckResponse {
		t.Helper()
		var check *admissionv1.CheckResponse
		servicetest.Eventually(t, 30*time.Second, "an ALLOW from admission", func() bool {
			check, err = adm.Check(ctx, checkReq)
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			return check.GetDecision() == admissionv1.Decision_DECISION_ALLOW && check.GetReceipt().GetPolicyEpoch() == epoch
		})
		return check
	}
	check := allow()

	// toolcrib lease issue: a lease for that receipt, bound to the holder key.
	holderPub, holder, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	argDigest, err := lease.ArgumentDigest(rawArgs)
	if err != nil {
		t.Fatal(err)
	}
	leases := leasev1.NewLeaseServiceClient(servicetest.Dial(t, leaseAddr, alice))
	issue := func(check *admissionv1.CheckResponse) *leasev1.IssueResponse {
		t.Helper()
		iss, err := leases.Issue(ctx, &leasev1.IssueRequest{
			ReceiptId: check.GetReceipt().GetReceiptId(), ArgumentDigest: argDigest, HolderPublicKey: lease.PublicJWK(holderPub), Audience: audience})
		if err != nil {
			t.Fatalf("Issue: %v", err)
		}
		return iss
	}
	iss := issue(check)

	// The example server runs the call with the lease, once.
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "tour", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: mcpURL, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	call := func(iss *leasev1.IssueResponse) *mcp.CallToolResult {
		t.Helper()
		params := &mcp.CallToolParams{Name: tourTool, Arguments: args}
		if iss != nil {
			proof, err := lease.NewProof(holder, lease.Claims{ID: iss.GetClaims().GetLeaseId(), ArgumentDigest: argDigest, Audience: audience}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			executor.Attach(params, iss.GetToken(), proof)
		}
		res, err := cs.CallTool(ctx, params)
		if err != nil {
			t.Fatalf("tools/call: %v", err)
		}
		return res
	}
	failure := func(res *mcp.CallToolResult) string {
		s, _ := res.Meta[lease.MetaFailure].(string)
		return s
	}
	if res := call(nil); !res.IsError || failure(res) != lease.BadSignature.String() {
		t.Fatalf("a call without a lease: isError=%v failure %q", res.IsError, failure(res))
	}
	res := call(iss)
	if res.IsError {
		t.Fatalf("the call with the lease was refused: %q", failure(res))
	}
	out, _ := json.Marshal(res.StructuredContent)
	var got struct {
		ShipmentID string `json:"shipment_id"`
		Status     string `json:"status"`
	}
	if json.Unmarshal(out, &got) != nil || got.ShipmentID != "SHP-1" || got.Status != "in_transit" {
		t.Fatalf("the tool's result: %s", out)
	}
	if res := call(iss); !res.IsError || failure(res) != lease.AlreadyUsed.String() {
		t.Fatalf("the same lease a second time: isError=%v failure %q", res.IsError, failure(res))
	}

	// A second lease taken before the revoke, then toolcrib revoke: the next
	// check is POLICY_REVOKED (the plan's epoch allowed it, the current one
	// does not) and the unused lease is refused too.
	spare := issue(allow())
	if _, err := reg.RevokeScopes(ctx, &registryv1.RevokeScopesRequest{TenantId: tenant, Group: "readers",
		Scopes: []string{"inventory:read"}}); err != nil {
		t.Fatal(err)
	}
	servicetest.Eventually(t, 30*time.Second, "POLICY_REVOKED after the revoke", func() bool {
		res, err := adm.Check(ctx, checkReq)
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		if res.GetDecision() == admissionv1.Decision_DECISION_ALLOW {
			return false
		}
		if res.GetReason() != catalogv1.DecisionReason_DECISION_REASON_POLICY_REVOKED {
			t.Fatalf("after the revoke: %v %v (%s)", res.GetDecision(), res.GetReason(), res.GetDetail())
		}
		return true
	})
	servicetest.Eventually(t, 30*time.Second, "the spare lease refused after the revoke", func() bool {
		res := call(spare)
		if !res.IsError {
			t.Fatal("the spare lease ran the call after the revoke")
		}
		return failure(res) == lease.PolicyChanged.String()
	})
}

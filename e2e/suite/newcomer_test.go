package suite

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	"github.com/toolcrib/toolcrib/e2e/stack"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/canonical"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/discovery"
)

const (
	serverID = "inventory"
	tenant   = "tenant-a"
	class    = "tenant-a.readers"
	toolID   = "inventory.shipment_status"
)

func shipmentStatus(description string) fixture.Tool {
	return fixture.MustRawTool(`{"name":"shipment_status","description":"` + description + `",
"inputSchema":{"type":"object","properties":{"shipment_id":{"type":"string"}},"required":["shipment_id"]},
"outputSchema":{"type":"object","properties":{"shipment_id":{"type":"string"},"status":{"type":"string"},
"updated_at":{"type":"string"}},"required":["shipment_id","status"]},
"annotations":{"readOnlyHint":true}}`)
}

func reserve() fixture.Tool {
	return fixture.MustRawTool(`{"name":"reserve","description":"Hold units of one SKU for an order.",
"inputSchema":{"type":"object","properties":{"sku":{"type":"string"},"units":{"type":"integer"}}}}`)
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestNewcomerFlow is the README's walk-through, end to end through the
// real registry and discovery services and a versioned MCP server over
// streamable HTTP: register the server, scan it, see a proven generation
// and its tools pending review in the registry without anyone calling the
// registry; review and enable a tool; change its description at the source;
// see a new generation and the registry mark the tool unreviewed, with the
// earlier approval kept on record.
func TestNewcomerFlow(t *testing.T) {
	ctx := ctxFor(t)
	st := stack.Start(t, stack.Options{Discovery: func(c *discovery.Config) { c.Linger = 0 }})

	srv, err := fixture.New(fixture.Script{Name: "inventory", Versioned: true, PageSize: 1,
		Tools: []fixture.Tool{shipmentStatus("Query the current status of a shipment."), reserve()}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ep, err := srv.StartHTTP(fixture.HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })

	reg := st.Registry
	if _, err := reg.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: &registryv1.Server{
		ServerId: serverID, Owner: tenant + "/group:inventory-team",
		Transport:      &registryv1.Server_StreamableHttp{StreamableHttp: &registryv1.StreamableHttpTransport{Url: ep.URL}},
		TrustLevel:     registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY,
		RevisionSource: registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED,
		ScanInterval:   durationpb.New(time.Hour),
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.PutTenant(ctx, &registryv1.PutTenantRequest{Tenant: &registryv1.Tenant{TenantId: tenant}}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: &registryv1.AudienceClass{
		Name: class, TenantId: tenant, Servers: []*registryv1.AudienceServer{{ServerId: serverID}},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenant, Group: "readers",
		Scopes: []string{"shipment:read"}, AudienceClasses: []string{class}}); err != nil {
		t.Fatal(err)
	}

	// The newcomer scans; the registry change may already have queued one.
	key := discovery.PointerKey{ServerID: serverID, AudienceClass: class}
	if _, err := st.Discovery.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: serverID, AudienceClass: class}); err != nil {
		t.Fatal(err)
	}
	if _, err := discovery.WaitPointers(ctx, st.Discovery, 0, []discovery.PointerKey{key}, nil); err != nil {
		t.Fatal(err)
	}
	active, err := st.Discovery.GetActiveSnapshot(ctx, &discoveryv1.GetActiveSnapshotRequest{ServerId: serverID, AudienceClass: class})
	if err != nil {
		t.Fatal(err)
	}
	snap := active.GetSnapshot()
	if active.GetPointer().GetGeneration() != 1 || snap.GetState() != catalogv1.DiscoveryState_DISCOVERY_STATE_ELIGIBLE ||
		snap.GetSourceRevision() == "" || len(snap.GetTools()) != 2 || len(snap.GetPageDigests()) != 2 {
		t.Fatalf("first generation: pointer %v, state %v, revision %q, %d tools, %d pages", active.GetPointer(),
			snap.GetState(), snap.GetSourceRevision(), len(snap.GetTools()), len(snap.GetPageDigests()))
	}
	firstDigest := descriptorDigest(t, snap, "shipment_status")
	if want, _ := canonical.Digest(shipmentStatus("Query the current status of a shipment.").JSON()); firstDigest != want {
		t.Fatalf("descriptor digest %s, want the canonical digest of the raw tool %s", firstDigest, want)
	}

	// The registry learned the tools from discovery: pending, disabled.
	var tool *registryv1.Tool
	servicetest.Eventually(t, 30*time.Second, "tools pending review in the registry", func() bool {
		resp, err := reg.ListTools(ctx, &registryv1.ListToolsRequest{ServerId: serverID})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetTools()) != 2 {
			return false
		}
		for _, tl := range resp.GetTools() {
			if tl.GetReviewState() != registryv1.ReviewState_REVIEW_STATE_PENDING_CONTRACT || tl.GetEnabled() {
				t.Fatalf("discovered tool %s: %v enabled=%v", tl.GetToolId(), tl.GetReviewState(), tl.GetEnabled())
			}
			if tl.GetToolId() == toolID {
				tool = tl
			}
		}
		return true
	})
	if tool.GetDescriptorDigest() != firstDigest {
		t.Fatalf("registry descriptor %s, discovery %s", tool.GetDescriptorDigest(), firstDigest)
	}

	// The owner publishes, approves the exact digest, enables.
	pub, err := reg.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: &registryv1.ToolContract{
		ToolId: toolID, Effect: catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY, Scope: "shipment:read",
		Authorization:    registryv1.Authorization_AUTHORIZATION_CALLER_AND_TENANT,
		AllowedFields:    []string{"shipment_id", "status", "updated_at"},
		RequiredEvidence: []string{"shipment_id", "updated_at"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	approved := pub.GetTool().GetApprovalDigest()
	if _, err := reg.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: toolID, ApprovalDigest: approved}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.EnableTool(ctx, &registryv1.EnableToolRequest{ToolId: toolID}); err != nil {
		t.Fatal(err)
	}

	// The description changes at the source; the newcomer scans again.
	if _, err := srv.Apply(fixture.Upsert(shipmentStatus("Query the current status of a shipment and try to repair it."))); err != nil {
		t.Fatal(err)
	}
	head, err := st.Discovery.ListGenerations(ctx, &discoveryv1.ListGenerationsRequest{ServerId: serverID, AudienceClass: class})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Discovery.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: serverID, AudienceClass: class}); err != nil {
		t.Fatal(err)
	}
	moved, err := discovery.WaitPointers(ctx, st.Discovery, active.GetPointer().GetRevision(), []discovery.PointerKey{key},
		func(p *discoveryv1.ActivePointer) bool { return p.GetGeneration() == 2 })
	if err != nil {
		t.Fatal(err)
	}
	if p := moved[key]; p.GetState() != discoveryv1.PointerState_POINTER_STATE_ACTIVE || p.GetSourceRevision() == snap.GetSourceRevision() {
		t.Fatalf("second generation pointer %v (first revision %s)", p, snap.GetSourceRevision())
	}
	gens, err := st.Discovery.ListGenerations(ctx, &discoveryv1.ListGenerationsRequest{ServerId: serverID, AudienceClass: class})
	if err != nil {
		t.Fatal(err)
	}
	if len(head.GetGenerations()) != 1 || len(gens.GetGenerations()) != 2 ||
		gens.GetGenerations()[1].GetState() != catalogv1.DiscoveryState_DISCOVERY_STATE_RETIRED {
		t.Fatalf("generations before %v, after %v", head.GetGenerations(), gens.GetGenerations())
	}
	second, err := st.Discovery.GetActiveSnapshot(ctx, &discoveryv1.GetActiveSnapshotRequest{ServerId: serverID, AudienceClass: class})
	if err != nil {
		t.Fatal(err)
	}
	secondDigest := descriptorDigest(t, second.GetSnapshot(), "shipment_status")
	if secondDigest == firstDigest {
		t.Fatal("a description change kept the descriptor digest")
	}

	servicetest.Eventually(t, 30*time.Second, "the registry marks the changed tool unreviewed", func() bool {
		resp, err := reg.GetTool(ctx, &registryv1.GetToolRequest{ToolId: toolID})
		if err != nil {
			t.Fatal(err)
		}
		tool = resp.GetTool()
		return tool.GetDescriptorDigest() == secondDigest
	})
	if tool.GetReviewState() != registryv1.ReviewState_REVIEW_STATE_UNREVIEWED || tool.GetApprovalDigest() == approved ||
		len(tool.GetApprovals()) != 1 || tool.GetApprovals()[0].GetApprovalDigest() != approved ||
		tool.GetApprovals()[0].GetDescriptorDigest() != firstDigest {
		t.Fatalf("after the description change: state %v, approval digest %s, approvals %v",
			tool.GetReviewState(), tool.GetApprovalDigest(), tool.GetApprovals())
	}
	// The tool that did not change stays as it was.
	other, err := reg.GetTool(ctx, &registryv1.GetToolRequest{ToolId: "inventory.reserve"})
	if err != nil {
		t.Fatal(err)
	}
	if other.GetTool().GetReviewState() != registryv1.ReviewState_REVIEW_STATE_PENDING_CONTRACT {
		t.Fatalf("unchanged tool: %v", other.GetTool().GetReviewState())
	}
	// Discovery pinned the server's identity on first use.
	s, err := reg.GetServer(ctx, &registryv1.GetServerRequest{ServerId: serverID})
	if err != nil {
		t.Fatal(err)
	}
	if !canonical.ValidDigest(s.GetServer().GetIdentityPin()) || s.GetServer().GetIdentityPin() != snap.GetIdentityDigest() {
		t.Fatalf("identity pin %q, snapshot identity %q", s.GetServer().GetIdentityPin(), snap.GetIdentityDigest())
	}
}

func descriptorDigest(t *testing.T, s *catalogv1.Snapshot, name string) string {
	t.Helper()
	i := slices.IndexFunc(s.GetTools(), func(d *catalogv1.ToolDescriptor) bool { return d.GetName() == name })
	if i < 0 {
		t.Fatalf("snapshot generation %d has no tool %s", s.GetGeneration(), name)
	}
	return s.GetTools()[i].GetDescriptorDigest()
}

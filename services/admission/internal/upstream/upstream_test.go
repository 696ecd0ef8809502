package upstream

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/admission/internal/replica"
	"github.com/toolcrib/toolcrib/services/registry/registrytest"
)

// TestAgainstTheRealRegistry runs the adapters and both Watch loops
// against a real registry (Postgres-backed) and the registry's test
// discovery: a grant bumps the epoch in the heads through the Watch, the
// policy reads back with its grant and class, a committed generation
// becomes a pointer head and reads back tool by tool.
func TestAgainstTheRealRegistry(t *testing.T) {
	r := registrytest.Start(t, registrytest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := r.Admin(t)
	svc := servicetest.Dial(t, r.Addr, r.Auth.Service(t))
	rc := registryv1.NewRegistryServiceClient(svc)
	if _, err := admin.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: &registryv1.Server{
		ServerId: "logistics", Owner: "demo-a/group:logistics-owners",
		Transport:      &registryv1.Server_StreamableHttp{StreamableHttp: &registryv1.StreamableHttpTransport{Url: "https://logistics.example.test/mcp"}},
		TrustLevel:     registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY,
		RevisionSource: registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED,
		ScanInterval:   durationpb.New(5 * time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.PutTenant(ctx, &registryv1.PutTenantRequest{Tenant: &registryv1.Tenant{TenantId: "demo-a"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: &registryv1.AudienceClass{
		Name: "demo-a.readers", TenantId: "demo-a", Servers: []*registryv1.AudienceServer{{ServerId: "logistics"}}}}); err != nil {
		t.Fatal(err)
	}

	heads := replica.NewHeads(5*time.Second, nil)
	logger := slog.New(slog.DiscardHandler)
	dc := discoveryv1.NewDiscoveryServiceClient(servicetest.Dial(t, r.Discovery.Addr, r.Auth.Service(t)))
	fo := FollowOptions{Window: 5 * time.Second, Logger: logger}
	rf, df := RegistryFollower(rc, heads, fo), DiscoveryFollower(dc, heads, fo)
	go func() { _ = rf.Run(ctx) }()
	go func() { _ = df.Run(ctx) }()
	servicetest.Eventually(t, 10*time.Second, "both streams caught up", func() bool { return !heads.FreshUntil().IsZero() })

	reg := &Registry{C: rc}
	before, err := reg.Current(ctx, "demo-a")
	if err != nil {
		t.Fatal(err)
	}
	g, err := admin.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: "demo-a", Subject: "alice",
		Scopes: []string{"shipment:read"}, AudienceClasses: []string{"demo-a.readers"}})
	if err != nil {
		t.Fatal(err)
	}
	if g.GetPolicyEpoch() <= before.Epoch {
		t.Fatalf("grant did not bump the epoch: %d → %d", before.Epoch, g.GetPolicyEpoch())
	}
	servicetest.Eventually(t, 10*time.Second, "the epoch bump through the Watch", func() bool { e, _ := heads.Epoch("demo-a"); return e == g.GetPolicyEpoch() })
	pol, err := reg.PolicyAt(ctx, "demo-a", g.GetPolicyEpoch())
	if err != nil || len(pol.Grants) != 1 || pol.Grants[0].Subject != "alice" || pol.Classes["demo-a.readers"][0] != "logistics" {
		t.Fatalf("policy %+v, %v", pol, err)
	}
	// The policy at the epoch before the grant, from the registry's
	// history: no grant then.
	old, err := reg.PolicyAt(ctx, "demo-a", before.Epoch)
	if err != nil || old.Epoch != before.Epoch || len(old.Grants) != 0 {
		t.Fatalf("policy at the earlier epoch %d: %+v, %v", before.Epoch, old, err)
	}
	if _, err := reg.PolicyAt(ctx, "demo-a", g.GetPolicyEpoch()+1); err == nil || errors.Is(err, replica.ErrNotKept) {
		t.Fatalf("an epoch not reached: %v, want an error that is not ErrNotKept (which is remembered forever)", err)
	}
	if _, err := reg.Current(ctx, "nobody"); err == nil {
		t.Fatal("unknown tenant answered")
	}
	rv, err := reg.Review(ctx, "demo-a", g.GetPolicyEpoch(), "demo-a.readers", "logistics.none", "sha256:"+strings.Repeat("0", 64))
	if err != nil || rv.Known {
		t.Fatalf("unknown tool: %+v %v", rv, err)
	}

	// Discovery side: a committed generation is a head and reads back.
	tool := registrytest.Tool("logistics", "shipment_status", "Query a shipment's status.")
	gen, rev := r.Discovery.Commit("logistics", "demo-a.readers", tool)
	servicetest.Eventually(t, 10*time.Second, "the pointer move through the Watch", func() bool {
		p, ok := heads.Pointer("logistics", "demo-a.readers")
		return ok && p.Generation == gen && p.Revision == rev
	})
	disc := &Discovery{C: dc}
	got, err := disc.Generation(ctx, "logistics", "demo-a.readers", gen)
	if err != nil {
		t.Fatal(err)
	}
	e := got.Tools["logistics.shipment_status"]
	if e == nil || e.DescriptorDigest != tool.GetDescriptorDigest() || string(e.InputSchema) != `{"type":"object"}` {
		t.Fatalf("generation %+v", got.Tools)
	}
	if _, err := disc.Pointer(ctx, "logistics", "demo-a.nothing"); err == nil {
		t.Fatal("a pointer that does not exist answered")
	}
	// The registry learns the tool from discovery; Review reads it.
	r.WaitTool(t, "logistics.shipment_status", func(*registryv1.Tool) bool { return true })
	rv, err = reg.Review(ctx, "demo-a", g.GetPolicyEpoch(), "demo-a.readers", "logistics.shipment_status", tool.GetDescriptorDigest())
	if err != nil || !rv.Known || rv.Enabled || rv.Approved != nil {
		t.Fatalf("a new tool is known, disabled and unreviewed: %+v %v", rv, err)
	}

	// Published, approved for exactly this digest, enabled: GetToolReview
	// says so for the class; another digest of the tool is not approved.
	pub, err := admin.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: &registryv1.ToolContract{
		ToolId: "logistics.shipment_status", Effect: catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY, Scope: "shipment:read",
		Authorization: registryv1.Authorization_AUTHORIZATION_CALLER_AND_TENANT}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: "logistics.shipment_status", ApprovalDigest: pub.GetTool().GetApprovalDigest()}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.EnableTool(ctx, &registryv1.EnableToolRequest{ToolId: "logistics.shipment_status"}); err != nil {
		t.Fatal(err)
	}
	rv, err = reg.Review(ctx, "demo-a", 0, "demo-a.readers", "logistics.shipment_status", tool.GetDescriptorDigest())
	if err != nil || !rv.Known || !rv.Enabled || rv.Approved == nil || rv.Approved.Scope != "shipment:read" ||
		rv.Approved.Effect != catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY || rv.Trust != registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY {
		t.Fatalf("an approved, enabled tool of a first-party server: %+v %v", rv, err)
	}
	rv, err = reg.Review(ctx, "demo-a", 0, "demo-a.readers", "logistics.shipment_status", "sha256:"+strings.Repeat("1", 64))
	if err != nil || rv.Approved != nil {
		t.Fatalf("a digest never approved: %+v %v", rv, err)
	}
	// A class of another tenant is refused by the registry itself when a
	// tenant principal asks; through the service token it is answered, and
	// the adapter refuses an answer for a tenant other than the one asked.
	if _, err := reg.Review(ctx, "demo-b", 0, "demo-a.readers", "logistics.shipment_status", tool.GetDescriptorDigest()); err == nil {
		t.Fatal("a review of tenant demo-a's class accepted for tenant demo-b")
	}

	// A rollout stage is part of the policy at the epoch it took effect
	// at, and only from then on; FULL is no entry.
	if ro := pol.Rollout("logistics", "demo-a.readers"); ro != nil {
		t.Fatalf("a pair never set: %+v, want FULL (nil)", ro)
	}
	pct := int32(20)
	set, err := admin.SetRolloutStage(ctx, &registryv1.SetRolloutStageRequest{ServerId: "logistics", AudienceClass: "demo-a.readers",
		Stage: registryv1.Stage_STAGE_CANARY, CanaryPercent: &pct, Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	canary, err := reg.PolicyAt(ctx, "demo-a", set.GetPolicyEpoch())
	if err != nil {
		t.Fatal(err)
	}
	ro := canary.Rollout("logistics", "demo-a.readers")
	if ro == nil || !ro.Canary() || ro.Percent != 20 || len(ro.Effects) != 1 || ro.Effects[0] != catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY {
		t.Fatalf("the policy at the canary's epoch %d: stage %+v", set.GetPolicyEpoch(), ro)
	}
	if before, err := reg.PolicyAt(ctx, "demo-a", set.GetPolicyEpoch()-1); err != nil || before.Rollout("logistics", "demo-a.readers") != nil {
		t.Fatalf("the policy at the epoch before the canary: %+v, %v", before.Stages, err)
	}
	shadow, err := admin.SetRolloutStage(ctx, &registryv1.SetRolloutStageRequest{ServerId: "logistics", AudienceClass: "demo-a.readers",
		Stage: registryv1.Stage_STAGE_SHADOW, Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if cur, err := reg.Current(ctx, "demo-a"); err != nil || cur.Epoch != shadow.GetPolicyEpoch() || !cur.Rollout("logistics", "demo-a.readers").Shadow() {
		t.Fatalf("the current policy after SHADOW: epoch %d, stages %+v, %v", cur.Epoch, cur.Stages, err)
	}
}

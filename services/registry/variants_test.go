package registry_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/services/registry/registrytest"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// A second tenant reading the fixture's server as its own class, and a
// third tenant covering nothing of it.
const (
	classB  = "tenant-b.readers"
	tenantC = "tenant-c"
)

// setupTwoTenants is [setup] plus tenant-b reading the same server as
// tenant-b.readers, and tenant-c with a class on another server.
func setupTwoTenants(t *testing.T, r *registrytest.Registry) {
	t.Helper()
	setup(t, r)
	ctx, c := ctxT(t), r.Admin(t)
	other := logisticsServer()
	other.ServerId = "billing"
	if _, err := c.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: other}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ tenant, class, server string }{{tenantB, classB, server}, {tenantC, "tenant-c.readers", "billing"}} {
		if _, err := c.PutTenant(ctx, &registryv1.PutTenantRequest{Tenant: &registryv1.Tenant{TenantId: tc.tenant}}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: &registryv1.AudienceClass{
			Name: tc.class, TenantId: tc.tenant, Servers: []*registryv1.AudienceServer{{ServerId: tc.server}}}}); err != nil {
			t.Fatal(err)
		}
	}
}

// variantOf returns the tool's variant of class, failing when it has none.
func variantOf(t *testing.T, tool *registryv1.Tool, class string) *registryv1.ToolVariant {
	t.Helper()
	for _, v := range tool.GetVariants() {
		if v.GetAudienceClass() == class {
			return v
		}
	}
	t.Fatalf("tool %s has no variant of %s: %v", tool.GetToolId(), class, tool.GetVariants())
	return nil
}

// waitVariant waits until class's variant of the fixture tool has digest.
func waitVariant(t *testing.T, r *registrytest.Registry, class, digest string) *registryv1.Tool {
	t.Helper()
	return r.WaitTool(t, toolID, func(tool *registryv1.Tool) bool {
		for _, v := range tool.GetVariants() {
			if v.GetAudienceClass() == class && v.GetDescriptorDigest() == digest {
				return true
			}
		}
		return false
	})
}

func review(t *testing.T, c registryv1.RegistryServiceClient, class, digest string) *registryv1.GetToolReviewResponse {
	t.Helper()
	resp, err := c.GetToolReview(ctxT(t), &registryv1.GetToolReviewRequest{ToolId: toolID, DescriptorDigest: digest, AudienceClass: class})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// Two audience classes see different descriptors of one tool (MCP lets
// tools/list vary by credential): each is its own variant with its own
// approval digest and is approved on its own; a scan for class B never
// changes what class A sees or its review state; two classes seeing the
// same descriptor share its approval.
func TestTwoClassesSeeingDifferentDescriptorsAreReviewedSeparately(t *testing.T) {
	t.Parallel()
	r := registrytest.Start(t, registrytest.Options{})
	setupTwoTenants(t, r)
	ctx, admin := ctxT(t), r.Admin(t)
	va, vb := shipmentStatus("Query the current status of a shipment."), shipmentStatus("Query status; tenant-b edition.")
	r.Discovery.Commit(server, class, va)
	waitVariant(t, r, class, va.GetDescriptorDigest())
	r.Discovery.Commit(server, classB, vb)
	tool := waitVariant(t, r, classB, vb.GetDescriptorDigest())
	if a := variantOf(t, tool, class); a.GetDescriptorDigest() != va.GetDescriptorDigest() || !a.GetPresentAtSource() {
		t.Fatalf("tenant-b's scan changed tenant-a's variant: %v", a)
	}

	pub, err := admin.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: contractFor(toolID)})
	if err != nil {
		t.Fatal(err)
	}
	a, b := variantOf(t, pub.GetTool(), class), variantOf(t, pub.GetTool(), classB)
	if a.GetApprovalDigest() == "" || a.GetApprovalDigest() == b.GetApprovalDigest() ||
		a.GetReviewState() != registryv1.ReviewState_REVIEW_STATE_UNREVIEWED || b.GetReviewState() != registryv1.ReviewState_REVIEW_STATE_UNREVIEWED {
		t.Fatalf("after publish: a %v, b %v", a, b)
	}

	// Approving A's digest approves A only.
	app, err := admin.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: toolID, ApprovalDigest: a.GetApprovalDigest()})
	if err != nil {
		t.Fatal(err)
	}
	if got := variantOf(t, app.GetTool(), class).GetReviewState(); got != registryv1.ReviewState_REVIEW_STATE_APPROVED {
		t.Fatalf("A after approving A: %v", got)
	}
	if got := variantOf(t, app.GetTool(), classB).GetReviewState(); got != registryv1.ReviewState_REVIEW_STATE_UNREVIEWED {
		t.Fatalf("B after approving A: %v, want UNREVIEWED (B's descriptor was never reviewed)", got)
	}
	if rv := review(t, admin, class, va.GetDescriptorDigest()); !rv.GetApproved() || rv.GetApprovalDigest() != a.GetApprovalDigest() {
		t.Fatalf("review of A: %v", rv)
	}
	if rv := review(t, admin, classB, vb.GetDescriptorDigest()); rv.GetApproved() || rv.GetReviewState() != registryv1.ReviewState_REVIEW_STATE_UNREVIEWED {
		t.Fatalf("review of B: %v", rv)
	}

	// B's descriptor changes at the source: A's variant, review and epoch
	// stay exactly as they were.
	epochA := epochOf(t, admin, tenant)
	before := variantOf(t, app.GetTool(), class)
	vb2 := shipmentStatus("Query status and try to repair it; tenant-b edition.")
	r.Discovery.Commit(server, classB, vb2)
	tool = waitVariant(t, r, classB, vb2.GetDescriptorDigest())
	if after := variantOf(t, tool, class); !proto.Equal(after, before) {
		t.Fatalf("a scan for class B changed class A's variant:\nbefore %v\nafter  %v", before, after)
	}
	if e := epochOf(t, admin, tenant); e != epochA {
		t.Fatalf("a scan for class B moved tenant-a's epoch %d -> %d", epochA, e)
	}
	if rv := review(t, admin, class, va.GetDescriptorDigest()); !rv.GetApproved() || !rv.GetCurrentAtSource() {
		t.Fatalf("review of A after B's scan: %v", rv)
	}
	b2 := variantOf(t, tool, classB)
	if b2.GetReviewState() != registryv1.ReviewState_REVIEW_STATE_UNREVIEWED {
		t.Fatalf("B's new descriptor: %v", b2)
	}
	// The old digest of B is no longer any variant's: approving it is stale.
	_, err = admin.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: toolID, ApprovalDigest: b.GetApprovalDigest()})
	wantCode(t, err, codes.FailedPrecondition, "APPROVAL_DIGEST_STALE")
	app, err = admin.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: toolID, ApprovalDigest: b2.GetApprovalDigest()})
	if err != nil {
		t.Fatal(err)
	}
	if got := variantOf(t, app.GetTool(), classB).GetReviewState(); got != registryv1.ReviewState_REVIEW_STATE_APPROVED {
		t.Fatalf("B after its own approval: %v", got)
	}

	// B now sees A's descriptor: approval binds content, so A's approval
	// covers it; B's own history shows only B's changes.
	r.Discovery.Commit(server, classB, va)
	tool = waitVariant(t, r, classB, va.GetDescriptorDigest())
	if got := variantOf(t, tool, classB); got.GetReviewState() != registryv1.ReviewState_REVIEW_STATE_APPROVED ||
		got.GetApprovalDigest() != a.GetApprovalDigest() {
		t.Fatalf("B at A's approved descriptor: %v", got)
	}
	_, history := getTool(t, admin, toolID)
	var source []string
	for _, h := range history {
		if h.GetAudienceClass() != "" {
			source = append(source, h.GetAudienceClass()+":"+h.GetKind())
		}
	}
	want := []string{class + ":DISCOVERED", classB + ":DISCOVERED", classB + ":DESCRIPTOR_CHANGED", classB + ":DESCRIPTOR_CHANGED"}
	if !slices.Equal(source, want) {
		t.Fatalf("source history %v, want %v", source, want)
	}
}

// A tenant principal sees only tools its tenant's audience classes have
// seen, and only their variants; anything else is NOT_FOUND exactly like a
// tool that does not exist, and no response carries another tenant's
// descriptor text.
func TestTenantReadsOnlyItsOwnToolsAndVariants(t *testing.T) {
	t.Parallel()
	r := registrytest.Start(t, registrytest.Options{})
	setupTwoTenants(t, r)
	ctx, admin := ctxT(t), r.Admin(t)
	// warehouse is covered by tenant-b's class only.
	wh := logisticsServer()
	wh.ServerId = "warehouse"
	if _, err := admin.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: wh}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: &registryv1.AudienceClass{
		Name: "tenant-b.private", TenantId: tenantB, Servers: []*registryv1.AudienceServer{{ServerId: "warehouse"}}}}); err != nil {
		t.Fatal(err)
	}
	const secret = "TENANT-B PRIVATE: internal warehouse lookup"
	r.Discovery.Commit("warehouse", "tenant-b.private", registrytest.Tool("warehouse", "lookup", secret))
	r.WaitTool(t, "warehouse.lookup", present(true))
	// On the shared server, tenant-b's credential sees a private
	// description and one more tool.
	va := shipmentStatus("Query the current status of a shipment.")
	r.Discovery.Commit(server, class, va)
	waitVariant(t, r, class, va.GetDescriptorDigest())
	vb := shipmentStatus(secret + " (shipments)")
	r.Discovery.Commit(server, classB, vb, registrytest.Tool(server, "b_only", secret))
	waitVariant(t, r, classB, vb.GetDescriptorDigest())
	pub, err := admin.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: contractFor(toolID)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: toolID,
		ApprovalDigest: variantOf(t, pub.GetTool(), classB).GetApprovalDigest(), Comment: secret}); err != nil {
		t.Fatal(err)
	}

	userA := r.Client(t, r.Auth.User(t, "alice", tenant, owners))
	noLeak := func(what string, m proto.Message) {
		t.Helper()
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("TENANT-B")) || bytes.Contains(b, []byte(classB)) {
			t.Fatalf("%s shows tenant-a something of tenant-b: %v", what, m)
		}
	}

	// Not yours and not there look the same.
	for _, id := range []string{"warehouse.lookup", "logistics.b_only"} {
		_, errTheirs := userA.GetTool(ctx, &registryv1.GetToolRequest{ToolId: id, IncludeHistory: true})
		stTheirs := wantCode(t, errTheirs, codes.NotFound, "NOT_FOUND")
		_, errNone := userA.GetTool(ctx, &registryv1.GetToolRequest{ToolId: id + "x"})
		stNone := wantCode(t, errNone, codes.NotFound, "NOT_FOUND")
		if strings.Replace(stTheirs.Message(), id, "ID", 1) != strings.Replace(stNone.Message(), id+"x", "ID", 1) ||
			strings.Contains(stTheirs.Message(), "TENANT-B") {
			t.Fatalf("tenant-b's tool answers %q, a missing one %q", stTheirs.Message(), stNone.Message())
		}
		noLeak("the NOT_FOUND status of "+id, status.Convert(errTheirs).Proto())
		// Review actions answer the same NOT_FOUND, never PERMISSION_DENIED,
		// even for a member of the owner group.
		_, err := userA.DisableTool(ctx, &registryv1.DisableToolRequest{ToolId: id})
		wantCode(t, err, codes.NotFound, "NOT_FOUND")
		_, err = userA.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: contractFor(id)})
		wantCode(t, err, codes.NotFound, "NOT_FOUND")
	}
	for _, srv := range []string{"", "warehouse"} {
		list, err := userA.ListTools(ctx, &registryv1.ListToolsRequest{ServerId: srv})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, tl := range list.GetTools() {
			ids = append(ids, tl.GetToolId())
		}
		if want := []string{toolID}; srv == "warehouse" && len(ids) != 0 || srv == "" && !slices.Equal(ids, want) {
			t.Fatalf("tenant-a lists %v on %q", ids, srv)
		}
		noLeak("ListTools", list)
	}
	// The shared tool: only tenant-a's variant, its own descriptor at tool
	// level, no approval or history of tenant-b's descriptor.
	resp, err := userA.GetTool(ctx, &registryv1.GetToolRequest{ToolId: toolID, IncludeHistory: true})
	if err != nil {
		t.Fatal(err)
	}
	tool := resp.GetTool()
	if len(tool.GetVariants()) != 1 || tool.GetVariants()[0].GetAudienceClass() != class ||
		tool.GetDescriptorDigest() != va.GetDescriptorDigest() || len(tool.GetApprovals()) != 0 ||
		tool.GetReviewState() != registryv1.ReviewState_REVIEW_STATE_UNREVIEWED {
		t.Fatalf("tenant-a's view of the shared tool: %v", tool)
	}
	for _, h := range resp.GetHistory() {
		if h.GetKind() == "APPROVED" || (h.GetDescriptorDigest() != "" && h.GetDescriptorDigest() != va.GetDescriptorDigest()) {
			t.Fatalf("tenant-a's history shows %v", h)
		}
	}
	noLeak("GetTool", resp)
	// Approving tenant-b's digest from tenant-a is not possible: it is not a
	// digest of any variant tenant-a sees.
	_, err = userA.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: toolID,
		ApprovalDigest: variantOf(t, pub.GetTool(), classB).GetApprovalDigest()})
	wantCode(t, err, codes.FailedPrecondition, "APPROVAL_DIGEST_STALE")

	// Tenant-b sees its own; admins and services see everything.
	userB := r.Client(t, r.Auth.User(t, "bob", tenantB))
	if resp, err := userB.GetTool(ctx, &registryv1.GetToolRequest{ToolId: "warehouse.lookup"}); err != nil ||
		!strings.Contains(string(resp.GetTool().GetVariants()[0].GetDescriptorRaw()), secret) {
		t.Fatalf("tenant-b reading its own tool: %v %v", resp, err)
	}
	for name, c := range map[string]registryv1.RegistryServiceClient{"admin": admin, "service": r.Client(t, r.Auth.Service(t))} {
		list, err := c.ListTools(ctx, &registryv1.ListToolsRequest{})
		if err != nil || len(list.GetTools()) != 3 {
			t.Fatalf("%s lists %d tools (%v), want 3", name, len(list.GetTools()), err)
		}
	}
}

// GetToolReview, admission's question: the exact digest's approval under
// the current contract, the kill switch, the contract, and the policy epoch
// of the class's tenant read with them; callable by services and admins
// for any class, by a tenant principal for its own classes only; inputs
// are validated and never echoed in full.
func TestGetToolReviewAnswersAdmissionsQuestion(t *testing.T) {
	t.Parallel()
	r := registrytest.Start(t, registrytest.Options{})
	setupTwoTenants(t, r)
	ctx, admin := ctxT(t), r.Admin(t)
	service := r.Client(t, r.Auth.Service(t))
	v1 := shipmentStatus("v1")
	r.Discovery.Commit(server, class, v1)
	waitVariant(t, r, class, v1.GetDescriptorDigest())

	rv := review(t, service, class, v1.GetDescriptorDigest())
	if rv.GetApproved() || rv.GetEnabled() || rv.GetReviewState() != registryv1.ReviewState_REVIEW_STATE_PENDING_CONTRACT ||
		rv.GetContract() != nil || rv.GetApprovalDigest() != "" || rv.GetTenantId() != tenant ||
		rv.GetPolicyEpoch() != epochOf(t, admin, tenant) || !rv.GetCurrentAtSource() ||
		rv.GetTrustLevel() != registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY || rv.GetRevision() == 0 {
		t.Fatalf("before any contract: %v", rv)
	}
	c := contractFor(toolID)
	c.Confirmation = registryv1.Confirmation_CONFIRMATION_ALWAYS
	pub, err := admin.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: c})
	if err != nil {
		t.Fatal(err)
	}
	d := pub.GetTool().GetApprovalDigest()
	if _, err := admin.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: toolID, ApprovalDigest: d, Comment: "ok"}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.EnableTool(ctx, &registryv1.EnableToolRequest{ToolId: toolID}); err != nil {
		t.Fatal(err)
	}
	rv = review(t, service, class, v1.GetDescriptorDigest())
	if !rv.GetApproved() || !rv.GetEnabled() || rv.GetApprovalDigest() != d || rv.GetApproval().GetApprovalDigest() != d ||
		rv.GetApproval().GetComment() != "ok" || rv.GetContractVersion() != 1 || rv.GetPolicyEpoch() != epochOf(t, admin, tenant) {
		t.Fatalf("approved and enabled: %v", rv)
	}
	if got := rv.GetContract(); got.GetEffect() != catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY || got.GetScope() != "shipment:read" ||
		got.GetConfirmation() != registryv1.Confirmation_CONFIRMATION_ALWAYS || got.GetDeadlineMs() != 2000 ||
		!slices.Equal(got.GetAllowedFields(), []string{"shipment_id", "status", "updated_at"}) ||
		!slices.Equal(got.GetRequiredEvidence(), []string{"shipment_id", "updated_at"}) {
		t.Fatalf("contract %v", got)
	}
	// A descriptor digest the plan was made with that is not the approved
	// one: not approved, whatever the class sees now.
	other := shipmentStatus("v2").GetDescriptorDigest()
	if rv := review(t, service, class, other); rv.GetApproved() || rv.GetReviewState() != registryv1.ReviewState_REVIEW_STATE_UNREVIEWED ||
		rv.GetCurrentAtSource() || rv.GetApprovalDigest() == d {
		t.Fatalf("another digest: %v", rv)
	}
	// The source moves on: the old digest stays approved (approval binds
	// content), but is no longer what the class sees.
	r.Discovery.Commit(server, class, shipmentStatus("v2"))
	waitVariant(t, r, class, other)
	if rv := review(t, service, class, v1.GetDescriptorDigest()); !rv.GetApproved() || rv.GetCurrentAtSource() {
		t.Fatalf("old digest after a change at the source: %v", rv)
	}

	// Tenant principals: own classes only; another tenant's class is
	// refused from its name, before any lookup, existing or not.
	userA := r.Client(t, r.Auth.User(t, "alice", tenant))
	if rv := review(t, userA, class, v1.GetDescriptorDigest()); !rv.GetApproved() {
		t.Fatalf("tenant-a asking about its own class: %v", rv)
	}
	for _, cl := range []string{classB, "tenant-b.nonexistent"} {
		_, err := userA.GetToolReview(ctx, &registryv1.GetToolReviewRequest{ToolId: toolID, DescriptorDigest: v1.GetDescriptorDigest(), AudienceClass: cl})
		wantCode(t, err, codes.PermissionDenied, "PERMISSION_DENIED")
	}
	// NOT_FOUND: unknown class; a class that does not cover the server; a
	// class that never saw the tool; an unknown tool.
	for _, req := range []*registryv1.GetToolReviewRequest{
		{ToolId: toolID, DescriptorDigest: v1.GetDescriptorDigest(), AudienceClass: "tenant-a.nonexistent"},
		{ToolId: toolID, DescriptorDigest: v1.GetDescriptorDigest(), AudienceClass: "tenant-c.readers"},
		{ToolId: toolID, DescriptorDigest: v1.GetDescriptorDigest(), AudienceClass: classB},
		{ToolId: "logistics.nothing", DescriptorDigest: v1.GetDescriptorDigest(), AudienceClass: class},
	} {
		_, err := service.GetToolReview(ctx, req)
		wantCode(t, err, codes.NotFound, "NOT_FOUND")
	}
	// Bad input: one violation per field, a megabyte never echoed.
	huge := strings.Repeat("x", 1<<20)
	_, err = service.GetToolReview(ctx, &registryv1.GetToolReviewRequest{ToolId: huge, DescriptorDigest: "sha256:nope", AudienceClass: huge})
	wantFields(t, err, "audience_class", "descriptor_digest", "tool_id")
	if b, _ := proto.Marshal(status.Convert(err).Proto()); len(b) > 4096 {
		t.Fatalf("the error for a megabyte of input is %d bytes", len(b))
	}
	_, err = r.Client(t, "").GetToolReview(ctx, &registryv1.GetToolReviewRequest{ToolId: toolID})
	wantCode(t, err, codes.Unauthenticated, "")
}

// Every publish, approve, enable, disable and rollback bumps the policy
// epoch of every tenant whose audience classes cover the tool's server —
// and no other — in the transaction of the change: the tool change and the
// bumps are consecutive revisions of one commit, and GetToolReview reads
// the new epoch.
func TestToolChangesBumpEveryCoveringTenantInTheSameTransaction(t *testing.T) {
	t.Parallel()
	r := registrytest.Start(t, registrytest.Options{})
	setupTwoTenants(t, r)
	ctx, admin := ctxT(t), r.Admin(t)
	v1 := shipmentStatus("v1")
	r.Discovery.Commit(server, class, v1)
	r.Discovery.Commit(server, classB, v1)
	waitVariant(t, r, classB, v1.GetDescriptorDigest())

	publish := func(deadline int32) *registryv1.Tool {
		c := contractFor(toolID)
		c.DeadlineMs = deadline
		resp, err := admin.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: c})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetTool()
	}
	var digest string
	steps := []struct {
		cause string
		do    func()
	}{
		{"CONTRACT_PUBLISHED", func() { digest = publish(1000).GetApprovalDigest() }},
		{"TOOL_APPROVED", func() {
			if _, err := admin.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: toolID, ApprovalDigest: digest}); err != nil {
				t.Fatal(err)
			}
		}},
		{"CONTRACT_PUBLISHED", func() { digest = publish(2000).GetApprovalDigest() }},
		{"TOOL_APPROVED", func() {
			if _, err := admin.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: toolID, ApprovalDigest: digest}); err != nil {
				t.Fatal(err)
			}
		}},
		{"TOOL_ENABLED", func() {
			if _, err := admin.EnableTool(ctx, &registryv1.EnableToolRequest{ToolId: toolID}); err != nil {
				t.Fatal(err)
			}
		}},
		{"TOOL_DISABLED", func() {
			if _, err := admin.DisableTool(ctx, &registryv1.DisableToolRequest{ToolId: toolID}); err != nil {
				t.Fatal(err)
			}
		}},
		{"TOOL_ROLLED_BACK", func() {
			if _, err := admin.RollbackTool(ctx, &registryv1.RollbackToolRequest{ToolId: toolID}); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, step := range steps {
		before := map[string]int64{tenant: epochOf(t, admin, tenant), tenantB: epochOf(t, admin, tenantB), tenantC: epochOf(t, admin, tenantC)}
		list, err := admin.ListTools(ctx, &registryv1.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		w := watch(t, admin, list.GetRevision())
		step.do()
		changes := w.next(t, 3)
		w.cancel()
		toolChange, pa, pb := changes[0], changes[1].GetPolicy(), changes[2].GetPolicy()
		if toolChange.GetTool().GetToolId() != toolID || pa.GetTenantId() != tenant || pb.GetTenantId() != tenantB ||
			changelog.PolicyCauseName(pa.GetCauseCode()) != step.cause || changelog.PolicyCauseName(pb.GetCauseCode()) != step.cause {
			t.Fatalf("%s: changes %v", step.cause, changes)
		}
		for i := 1; i < 3; i++ {
			if changes[i].GetRevision() != changes[0].GetRevision()+int64(i) || !proto.Equal(changes[i].GetCommittedAt(), changes[0].GetCommittedAt()) {
				t.Fatalf("%s: the tool change and the bumps are not one commit: %v", step.cause, changes)
			}
		}
		for tn, want := range map[string]int64{tenant: before[tenant] + 1, tenantB: before[tenantB] + 1, tenantC: before[tenantC]} {
			if got := epochOf(t, admin, tn); got != want {
				t.Fatalf("%s: %s at epoch %d, want %d", step.cause, tn, got, want)
			}
		}
		if pa.GetPolicyEpoch() != before[tenant]+1 || pb.GetPolicyEpoch() != before[tenantB]+1 {
			t.Fatalf("%s: bumps %v %v", step.cause, pa, pb)
		}
		for cl, tn := range map[string]string{class: tenant, classB: tenantB} {
			if rv := review(t, admin, cl, v1.GetDescriptorDigest()); rv.GetPolicyEpoch() != before[tn]+1 {
				t.Fatalf("%s: GetToolReview for %s read epoch %d, want %d", step.cause, cl, rv.GetPolicyEpoch(), before[tn]+1)
			}
		}
	}
	// A change that changes nothing (enabling twice is one enable, here the
	// tool is disabled; approving what is approved) bumps nothing.
	rv := review(t, admin, class, v1.GetDescriptorDigest())
	if _, err := admin.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: toolID, ApprovalDigest: rv.GetApprovalDigest()}); err != nil {
		t.Fatal(err)
	}
	if e := epochOf(t, admin, tenant); e != rv.GetPolicyEpoch() {
		t.Fatalf("a no-op approval moved the epoch %d -> %d", rv.GetPolicyEpoch(), e)
	}
}

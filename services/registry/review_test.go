package registry_test

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/registry/registrytest"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// A descriptor discovery commits for a tool the registry has never seen
// appears pending review and disabled, without anyone calling the
// registry; the registry presented its service token to discovery.
func TestDiscoveredToolAppearsPendingAndDisabled(t *testing.T) {
	t.Parallel()
	r := registrytest.Start(t, registrytest.Options{})
	setup(t, r)
	before := epochOf(t, r.Admin(t), tenant)

	tool := discover(t, r, shipmentStatus("Query the current status of a shipment."))
	if tool.GetReviewState() != registryv1.ReviewState_REVIEW_STATE_PENDING_CONTRACT || tool.GetEnabled() ||
		!tool.GetPresentAtSource() || tool.GetOwner() != tenant+"/group:"+owners || tool.GetApprovalDigest() != "" || tool.GetContract() != nil {
		t.Fatalf("discovered tool: %v", tool)
	}
	_, history := getTool(t, r.Admin(t), toolID)
	if len(history) != 1 || history[0].GetKind() != "DISCOVERED" || history[0].GetActor() != "discovery" {
		t.Fatalf("history %v", history)
	}
	if e := epochOf(t, r.Admin(t), tenant); e != before {
		t.Fatalf("a new tool at the source moved tenant-a's epoch %d -> %d; source changes come with a new generation and bump nothing", before, e)
	}
	verifier, err := principal.LoadVerifier(r.Auth.JWKSPath, principal.VerifierConfig{Issuer: servicetest.Issuer,
		Audience: servicetest.Audience, ServiceGroup: servicetest.ServiceGroup, PlatformTenant: servicetest.PlatformTenant})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range r.Discovery.Authorizations() {
		p, err := verifier.Verify(strings.TrimPrefix(a, "Bearer "))
		if err != nil || !p.Service {
			t.Fatalf("the registry called discovery with %q: %v %+v", a, err, p)
		}
	}
	list, err := r.Admin(t).ListTools(ctxT(t), &registryv1.ListToolsRequest{ReviewState: registryv1.ReviewState_REVIEW_STATE_PENDING_CONTRACT})
	if err != nil || len(list.GetTools()) != 1 || list.GetRevision() == 0 {
		t.Fatalf("pending list: %v %v", list, err)
	}
}

// The whole review flow of the seed article, with the exact refusals: a
// stale digest is refused, a description change at the source makes the
// approved tool unreviewed again while the old approval stays on record,
// and every change bumps the tenant's epoch.
func TestReviewFlow(t *testing.T) {
	t.Parallel()
	r, ctx, admin := startWithTool(t, "Query the current status of a shipment.")
	epoch := epochOf(t, admin, tenant)
	bumped := func(step string) {
		t.Helper()
		if e := epochOf(t, admin, tenant); e != epoch+1 {
			t.Fatalf("%s moved the epoch %d -> %d, want exactly one bump", step, epoch, e)
		}
		epoch++
	}
	unchanged := func(step string) {
		t.Helper()
		if e := epochOf(t, admin, tenant); e != epoch {
			t.Fatalf("%s moved the epoch %d -> %d, want no bump", step, epoch, e)
		}
	}

	c1 := contractFor(toolID)
	pub, err := admin.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: c1})
	if err != nil {
		t.Fatal(err)
	}
	d1 := pub.GetTool().GetApprovalDigest()
	if pub.GetTool().GetReviewState() != registryv1.ReviewState_REVIEW_STATE_UNREVIEWED || pub.GetTool().GetContractVersion() != 1 || d1 == "" {
		t.Fatalf("published: %v", pub.GetTool())
	}
	bumped("publish")

	// The reviewer looked at d1; meanwhile the owner published a second
	// contract. Approving d1 is refused.
	c2 := contractFor(toolID)
	c2.DeadlineMs = 3000
	pub2, err := admin.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: c2})
	if err != nil {
		t.Fatal(err)
	}
	d2 := pub2.GetTool().GetApprovalDigest()
	bumped("second publish")
	_, err = admin.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: toolID, ApprovalDigest: d1})
	st := wantCode(t, err, codes.FailedPrecondition, "APPROVAL_DIGEST_STALE")
	if !strings.Contains(st.Message(), "not the current approval digest") {
		t.Fatalf("message %q", st.Message())
	}
	if e := epochOf(t, admin, tenant); e != epoch {
		t.Fatal("a refused approval bumped the epoch")
	}

	app, err := admin.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: toolID, ApprovalDigest: d2, Comment: "looks right"})
	if err != nil {
		t.Fatal(err)
	}
	tool := app.GetTool()
	if tool.GetReviewState() != registryv1.ReviewState_REVIEW_STATE_APPROVED || tool.GetEnabled() ||
		len(tool.GetApprovals()) != 1 || tool.GetApprovals()[0].GetApprovalDigest() != d2 || tool.GetApprovals()[0].GetApprovedBy() != "test-admin" {
		t.Fatalf("approved: %v", tool)
	}
	bumped("approve")
	// Approving the same digest again changes nothing.
	if _, err := admin.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: toolID, ApprovalDigest: d2}); err != nil {
		t.Fatal(err)
	}
	if e := epochOf(t, admin, tenant); e != epoch {
		t.Fatal("a repeated approval bumped the epoch")
	}

	en, err := admin.EnableTool(ctx, &registryv1.EnableToolRequest{ToolId: toolID})
	if err != nil || !en.GetTool().GetEnabled() {
		t.Fatalf("enable: %v %v", en, err)
	}
	bumped("enable")

	// "Query the status" becomes "query and try to repair the status": a
	// new descriptor digest, so a new approval digest, unreviewed.
	tool = discover(t, r, shipmentStatus("Query the current status of a shipment and try to repair it."))
	if tool.GetReviewState() != registryv1.ReviewState_REVIEW_STATE_UNREVIEWED || tool.GetApprovalDigest() == d2 ||
		len(tool.GetApprovals()) != 1 || tool.GetApprovals()[0].GetApprovalDigest() != d2 || !tool.GetEnabled() {
		t.Fatalf("after a description change: %v", tool)
	}
	unchanged("description change at the source (the new generation carries it)")

	dis, err := admin.DisableTool(ctx, &registryv1.DisableToolRequest{ToolId: toolID, Reason: "rug pull suspected"})
	if err != nil || dis.GetTool().GetEnabled() || dis.GetTool().GetDisabledReason() != "rug pull suspected" {
		t.Fatalf("disable: %v %v", dis, err)
	}
	bumped("disable")

	_, history := getTool(t, admin, toolID)
	want := []string{"DISCOVERED", "PUBLISHED", "PUBLISHED", "APPROVED", "ENABLED", "DESCRIPTOR_CHANGED", "DISABLED"}
	if got := kinds(history); !slices.Equal(got, want) {
		t.Fatalf("history %v, want %v", got, want)
	}
	if h := history[3]; h.GetApprovalDigest() != d2 || h.GetDetail() != "looks right" || h.GetActor() != "test-admin" {
		t.Fatalf("approval event %v", h)
	}
	if h := history[1]; h.GetContract().GetDeadlineMs() != 2000 || h.GetContractVersion() != 1 {
		t.Fatalf("publish event %v", h)
	}
}

// Publishing refuses a contract whose evidence lies outside its projection,
// whose projection drops an outputSchema-required field, or that lacks
// effect, scope and authorization — one field violation per problem, and
// nothing is written.
func TestPublishRefusesConflictingContracts(t *testing.T) {
	t.Parallel()
	_, ctx, admin := startWithTool(t, "Query the current status of a shipment.")
	epoch := epochOf(t, admin, tenant)

	c := contractFor(toolID)
	c.AllowedFields = []string{"shipment_id", "status"}
	c.RequiredEvidence = []string{"shipment_id", "updated_at"}
	_, err := admin.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: c})
	vs := wantFields(t, err, "contract.allowed_fields", "contract.required_evidence[1]")
	if vs[0].description != `drops "updated_at", which the tool's outputSchema marks required` ||
		vs[1].description != `"updated_at" is not in allowed_fields: the projection would remove evidence the contract requires` {
		t.Fatalf("descriptions %v", vs)
	}

	c = contractFor(toolID)
	c.Effect, c.Scope, c.Authorization = catalogv1.EffectClass_EFFECT_CLASS_UNSPECIFIED, "", registryv1.Authorization_AUTHORIZATION_UNSPECIFIED
	_, err = admin.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: c})
	wantFields(t, err, "contract.authorization", "contract.effect", "contract.scope")

	_, err = admin.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: contractFor("logistics.unknown_tool")})
	wantCode(t, err, codes.NotFound, "NOT_FOUND")
	_, err = admin.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: contractFor("no-dot")})
	wantFields(t, err, "contract.tool_id")

	tool, history := getTool(t, admin, toolID)
	if tool.GetReviewState() != registryv1.ReviewState_REVIEW_STATE_PENDING_CONTRACT || tool.GetContractVersion() != 0 || len(history) != 1 {
		t.Fatalf("a refused publish wrote something: %v %v", tool, history)
	}
	if e := epochOf(t, admin, tenant); e != epoch {
		t.Fatal("a refused publish bumped the epoch")
	}
}

// Approval re-validates the contract against the current descriptor: a
// descriptor that now requires a field the projection drops cannot be
// approved, even with the current digest.
func TestApprovalRevalidatesAgainstCurrentDescriptor(t *testing.T) {
	t.Parallel()
	r, ctx, admin := startWithTool(t, "v1")
	if _, err := admin.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: contractFor(toolID)}); err != nil {
		t.Fatal(err)
	}
	tool := discover(t, r, registrytest.Tool(server, "shipment_status", "v2", "shipment_id", "status", "updated_at", "recipient_address"))
	_, err := admin.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: toolID, ApprovalDigest: tool.GetApprovalDigest()})
	wantCode(t, err, codes.FailedPrecondition, "CONTRACT_INVALID")
	if vs := violations(err); len(vs) != 1 || vs[0].field != "contract.allowed_fields" || !strings.Contains(vs[0].description, "recipient_address") {
		t.Fatalf("violations %v", vs)
	}
}

// Only the tool's owner (here a group) or a platform admin may publish,
// approve, enable, disable or roll back.
func TestOnlyOwnerOrAdminReviews(t *testing.T) {
	t.Parallel()
	r, ctx, _ := startWithTool(t, "v1")
	owner := r.Client(t, r.Auth.User(t, "lee", tenant, owners))
	stranger := r.Client(t, r.Auth.User(t, "mallory", tenant, "shipping"))

	_, err := stranger.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: contractFor(toolID)})
	wantCode(t, err, codes.PermissionDenied, "PERMISSION_DENIED")
	pub, err := owner.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: contractFor(toolID)})
	if err != nil {
		t.Fatal(err)
	}
	d := pub.GetTool().GetApprovalDigest()
	_, err = stranger.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: toolID, ApprovalDigest: d})
	wantCode(t, err, codes.PermissionDenied, "PERMISSION_DENIED")
	_, err = stranger.EnableTool(ctx, &registryv1.EnableToolRequest{ToolId: toolID})
	wantCode(t, err, codes.PermissionDenied, "PERMISSION_DENIED")
	_, err = stranger.DisableTool(ctx, &registryv1.DisableToolRequest{ToolId: toolID})
	wantCode(t, err, codes.PermissionDenied, "PERMISSION_DENIED")
	_, err = stranger.RollbackTool(ctx, &registryv1.RollbackToolRequest{ToolId: toolID})
	wantCode(t, err, codes.PermissionDenied, "PERMISSION_DENIED")
	if _, err := owner.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: toolID, ApprovalDigest: d}); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.EnableTool(ctx, &registryv1.EnableToolRequest{ToolId: toolID}); err != nil {
		t.Fatal(err)
	}
	// Reads are open to any principal of a tenant whose classes see the
	// tool.
	if _, err := stranger.GetTool(ctx, &registryv1.GetToolRequest{ToolId: toolID}); err != nil {
		t.Fatal(err)
	}
}

// RollbackTool: an unreviewed contract goes back to the newest approved one;
// an approved one has its approval withdrawn and the previous approval
// becomes current; with nothing to go back to it is refused with the exact
// reason.
func TestRollback(t *testing.T) {
	t.Parallel()
	r, ctx, admin := startWithTool(t, "v1")

	_, err := admin.RollbackTool(ctx, &registryv1.RollbackToolRequest{ToolId: toolID})
	wantCode(t, err, codes.FailedPrecondition, "NO_APPROVED_VERSION")

	publishApprove := func(deadline int32) string {
		t.Helper()
		c := contractFor(toolID)
		c.DeadlineMs = deadline
		pub, err := admin.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: c})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := admin.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: toolID, ApprovalDigest: pub.GetTool().GetApprovalDigest()}); err != nil {
			t.Fatal(err)
		}
		return pub.GetTool().GetApprovalDigest()
	}
	d1 := publishApprove(1000)
	_, err = admin.RollbackTool(ctx, &registryv1.RollbackToolRequest{ToolId: toolID})
	wantCode(t, err, codes.FailedPrecondition, "NO_APPROVED_VERSION")
	d2 := publishApprove(2000)

	// An unreviewed third contract goes back to the second.
	c3 := contractFor(toolID)
	c3.DeadlineMs = 3000
	if _, err := admin.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: c3}); err != nil {
		t.Fatal(err)
	}
	rb, err := admin.RollbackTool(ctx, &registryv1.RollbackToolRequest{ToolId: toolID, Reason: "not reviewed yet"})
	if err != nil {
		t.Fatal(err)
	}
	if tool := rb.GetTool(); tool.GetApprovalDigest() != d2 || tool.GetReviewState() != registryv1.ReviewState_REVIEW_STATE_APPROVED ||
		tool.GetContractVersion() != 2 || tool.GetContract().GetDeadlineMs() != 2000 || len(tool.GetApprovals()) != 2 {
		t.Fatalf("after rolling back an unreviewed contract: %v", tool)
	}

	// Approved: the second approval is withdrawn, the first is current.
	rb, err = admin.RollbackTool(ctx, &registryv1.RollbackToolRequest{ToolId: toolID, Reason: "v2 misbehaves"})
	if err != nil {
		t.Fatal(err)
	}
	if tool := rb.GetTool(); tool.GetApprovalDigest() != d1 || tool.GetReviewState() != registryv1.ReviewState_REVIEW_STATE_APPROVED ||
		tool.GetContractVersion() != 1 || len(tool.GetApprovals()) != 1 || tool.GetApprovals()[0].GetApprovalDigest() != d1 {
		t.Fatalf("after rolling back an approved contract: %v", tool)
	}

	// The descriptor changes at the source: the current contract already is
	// the newest approved one, and a rollback cannot undo the source.
	discover(t, r, shipmentStatus("v2"))
	_, err = admin.RollbackTool(ctx, &registryv1.RollbackToolRequest{ToolId: toolID})
	wantCode(t, err, codes.FailedPrecondition, "NOTHING_TO_ROLL_BACK")

	// Publishing after a rollback takes a new contract version, never a
	// reused one.
	pub, err := admin.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: contractFor(toolID)})
	if err != nil || pub.GetTool().GetContractVersion() != 4 {
		t.Fatalf("publish after rollback: version %d, %v", pub.GetTool().GetContractVersion(), err)
	}
	_, history := getTool(t, admin, toolID)
	var rolled []string
	for _, e := range history {
		if e.GetKind() == "ROLLED_BACK" {
			rolled = append(rolled, e.GetDetail())
		}
	}
	if len(rolled) != 2 || rolled[0] != "not reviewed yet" || rolled[1] != "v2 misbehaves; withdrew approval "+d2 {
		t.Fatalf("rollback history %q", rolled)
	}
}

// A contract's result budget is stored and returned (GetTool, the approval,
// GetToolReview, which the gateway reads); it is part of the approval
// digest; a negative or oversized budget is refused and nothing is written.
func TestPublishResultBudget(t *testing.T) {
	t.Parallel()
	_, ctx, admin := startWithTool(t, "Query the current status of a shipment.")

	for _, bad := range []int64{-1, 64<<20 + 1} {
		c := contractFor(toolID)
		c.ResultBudgetBytes = bad
		_, err := admin.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: c})
		wantCode(t, err, codes.InvalidArgument, "")
		vs := wantFields(t, err, "contract.result_budget_bytes")
		if vs[0].description != "must be 0 (the gateway's default) or between 1024 and 67108864" {
			t.Fatalf("budget %d: description %q", bad, vs[0].description)
		}
	}
	if tool, _ := getTool(t, admin, toolID); tool.GetContractVersion() != 0 {
		t.Fatalf("a refused budget wrote a contract: %v", tool)
	}

	pub, err := admin.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: contractFor(toolID)})
	if err != nil {
		t.Fatal(err)
	}
	noBudget := pub.GetTool().GetApprovalDigest()
	c := contractFor(toolID)
	c.ResultBudgetBytes = 1024
	pub, err = admin.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: c})
	if err != nil {
		t.Fatal(err)
	}
	d := pub.GetTool().GetApprovalDigest()
	if d == noBudget || pub.GetTool().GetContractVersion() != 2 {
		t.Fatalf("a budget is a contract change: digest %s (was %s), version %d", d, noBudget, pub.GetTool().GetContractVersion())
	}
	if _, err := admin.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: toolID, ApprovalDigest: d}); err != nil {
		t.Fatal(err)
	}
	tool, _ := getTool(t, admin, toolID)
	if tool.GetContract().GetResultBudgetBytes() != 1024 || tool.GetApprovals()[0].GetContract().GetResultBudgetBytes() != 1024 {
		t.Fatalf("stored budget: contract %v, approval %v", tool.GetContract(), tool.GetApprovals()[0].GetContract())
	}
	if got := review(t, admin, class, tool.GetDescriptorDigest()).GetContract().GetResultBudgetBytes(); got != 1024 {
		t.Fatalf("GetToolReview budget %d, want 1024", got)
	}
}

// allow_sampling is part of the approval digest when set: a contract that
// now allows sampling has a new digest, which the approval of the old one
// does not cover (the tool is unreviewed and GetToolReview, which the
// gateway reads, says not approved until it is approved itself); turning
// it off again gives back the old digest, which stays approved. It is
// stored and returned on the contract, the approval and GetToolReview. A
// principal of another tenant can neither publish it nor read the review;
// the tool's owner of this tenant can.
func TestPublishAllowSampling(t *testing.T) {
	t.Parallel()
	r, ctx, admin := startWithTool(t, "Query the current status of a shipment.")

	pub, err := admin.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: contractFor(toolID)})
	if err != nil {
		t.Fatal(err)
	}
	without := pub.GetTool().GetApprovalDigest()
	if _, err := admin.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: toolID, ApprovalDigest: without}); err != nil {
		t.Fatal(err)
	}
	tool, _ := getTool(t, admin, toolID)
	digest := tool.GetDescriptorDigest()
	if rv := review(t, admin, class, digest); !rv.GetApproved() || rv.GetContract().GetAllowSampling() {
		t.Fatalf("approved contract without sampling: approved %v, allow_sampling %v", rv.GetApproved(), rv.GetContract().GetAllowSampling())
	}

	// Another tenant's principal, even one in a group named like the
	// owners', cannot turn sampling on (to it the tool does not exist), nor
	// read the review of this tenant's class.
	stranger := r.Client(t, r.Auth.User(t, "mallory", "tenant-b", owners))
	c := contractFor(toolID)
	c.AllowSampling = true
	_, err = stranger.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: c})
	wantCode(t, err, codes.NotFound, "")
	_, err = stranger.GetToolReview(ctx, &registryv1.GetToolReviewRequest{ToolId: toolID, DescriptorDigest: digest, AudienceClass: class})
	wantCode(t, err, codes.PermissionDenied, "")
	if rv := review(t, admin, class, digest); !rv.GetApproved() || rv.GetContract().GetAllowSampling() || rv.GetApprovalDigest() != without {
		t.Fatalf("a refused publish changed the review: %v", rv)
	}

	owner := r.Client(t, r.Auth.User(t, "lee", tenant, owners))
	pub, err = owner.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: c})
	if err != nil {
		t.Fatal(err)
	}
	with := pub.GetTool().GetApprovalDigest()
	if with == without || pub.GetTool().GetReviewState() != registryv1.ReviewState_REVIEW_STATE_UNREVIEWED {
		t.Fatalf("allowing sampling: digest %s (was %s), state %v", with, without, pub.GetTool().GetReviewState())
	}
	rv := review(t, admin, class, digest)
	if rv.GetApproved() || !rv.GetContract().GetAllowSampling() || rv.GetApprovalDigest() != with {
		t.Fatalf("the approval of the digest without sampling covers the one with it: %v", rv)
	}
	_, err = owner.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: toolID, ApprovalDigest: without})
	wantCode(t, err, codes.FailedPrecondition, "APPROVAL_DIGEST_STALE")
	if _, err := owner.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: toolID, ApprovalDigest: with}); err != nil {
		t.Fatal(err)
	}
	tool, _ = getTool(t, admin, toolID)
	if !tool.GetContract().GetAllowSampling() || !tool.GetApprovals()[0].GetContract().GetAllowSampling() || tool.GetApprovals()[0].GetApprovalDigest() != with {
		t.Fatalf("stored: contract %v, approval %v", tool.GetContract(), tool.GetApprovals()[0])
	}
	if rv := review(t, admin, class, digest); !rv.GetApproved() || !rv.GetContract().GetAllowSampling() {
		t.Fatalf("approved contract with sampling: %v", rv)
	}

	// Off again: the digest without sampling, approved before.
	pub, err = owner.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: contractFor(toolID)})
	if err != nil {
		t.Fatal(err)
	}
	if d := pub.GetTool().GetApprovalDigest(); d != without || pub.GetTool().GetReviewState() != registryv1.ReviewState_REVIEW_STATE_APPROVED {
		t.Fatalf("sampling off: digest %s (want %s), state %v", d, without, pub.GetTool().GetReviewState())
	}
}

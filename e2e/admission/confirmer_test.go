package admission

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/toolcrib/toolcrib/e2e/leaseworld"
	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/revision/lease"
)

// noConfirmer starts the detail of the FORBIDDEN denial of a
// user-confirmed Check that no confirmer asserted (admission.proto, Check).
const noConfirmer = "a confirmer must assert the user's confirmation"

// TestOnlyAConfirmerAssertsAUserConfirmation (issue 20, point 2), through
// the real registry, discovery and admission, for a WRITE tool: alice's
// own token asking MODE_USER_CONFIRMED is FORBIDDEN (the detail saying a
// confirmer must assert it); so is a tenant-a user's token in the
// confirmer header, even one in a group named like the confirmer group,
// and the platform's service token; a confirmer of the platform tenant
// beside alice's token is ALLOW, and the receipt (Check's and
// GetReceipt's) names the confirmer, the time and the shown digest.
func TestOnlyAConfirmerAssertsAUserConfirmation(t *testing.T) {
	ctx := ctxFor(t)
	w := newWorld(t)
	reg := w.st.Registry
	pub, err := reg.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: &registryv1.ToolContract{
		ToolId: toolID, Effect: catalogv1.EffectClass_EFFECT_CLASS_WRITE, Scope: scope,
		Authorization: registryv1.Authorization_AUTHORIZATION_CALLER_AND_TENANT,
		AllowedFields: []string{"shipment_id", "status"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: toolID, ApprovalDigest: pub.GetTool().GetApprovalDigest()}); err != nil {
		t.Fatal(err)
	}
	rep := w.startReplica(t, 5*time.Second)
	alice := w.client(t, rep, "alice", tenantA)
	req := func() *admissionv1.CheckRequest {
		return &admissionv1.CheckRequest{ToolId: toolID, Generation: w.generation, DescriptorDigest: w.digest,
			Arguments: []byte(`{"shipment_id":"s-1"}`), Mode: admissionv1.Mode_MODE_USER_CONFIRMED}
	}
	// The replica has the WRITE contract once an autonomous call needs a
	// confirmation.
	deadline := time.Now().Add(20 * time.Second)
	for {
		auto := req()
		auto.Mode = admissionv1.Mode_MODE_AUTONOMOUS
		resp, err := alice.Check(ctx, auto)
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetReason() == catalogv1.DecisionReason_DECISION_REASON_CONFIRMATION_REQUIRED {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the WRITE contract never reached the replica: %v %q", resp.GetReason(), resp.GetDetail())
		}
		time.Sleep(50 * time.Millisecond)
	}

	as := func(tok string) grpc.CallOption { return grpc.PerRPCCredentials(principal.ConfirmerToken(tok)) }
	forbidden := func(name string, opts ...grpc.CallOption) {
		t.Helper()
		resp, err := alice.Check(ctx, req(), opts...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if resp.GetDecision() != admissionv1.Decision_DECISION_DENY || resp.GetReason() != catalogv1.DecisionReason_DECISION_REASON_FORBIDDEN ||
			!strings.HasPrefix(resp.GetDetail(), noConfirmer) || resp.GetReceipt().GetConfirmer() != "" {
			t.Fatalf("%s: %v %v %q, receipt %v; want DENY FORBIDDEN %q…", name, resp.GetDecision(), resp.GetReason(),
				resp.GetDetail(), resp.GetReceipt(), noConfirmer)
		}
	}
	forbidden("alice's own token alone")
	forbidden("alice's own token as confirmer", as(w.st.Auth.User(t, "alice", tenantA)))
	forbidden("a tenant-a user in a group named like the confirmer group", as(w.st.Auth.User(t, "mallory", tenantA, servicetest.ConfirmerGroup)))
	forbidden("the platform's service token", as(w.st.Auth.Service(t)))

	shown := "sha256:" + strings.Repeat("5", 64)
	confirmed := req()
	confirmed.ShownDigest = shown
	resp, err := alice.Check(ctx, confirmed, as(w.st.Auth.Confirmer(t)))
	if err != nil {
		t.Fatal(err)
	}
	rc := resp.GetReceipt()
	if resp.GetReason() != allow || rc.GetConfirmer() != "test-confirmer" || rc.GetShownDigest() != shown ||
		!proto.Equal(rc.GetConfirmedAt(), rc.GetDecidedAt()) || rc.GetSubject() != "alice" || rc.GetTenantId() != tenantA ||
		rc.GetEffectClass() != catalogv1.EffectClass_EFFECT_CLASS_WRITE {
		t.Fatalf("confirmed by a confirmer: %v %q, receipt %v", resp.GetReason(), resp.GetDetail(), rc)
	}
	got, err := alice.GetReceipt(ctx, &admissionv1.GetReceiptRequest{ReceiptId: rc.GetReceiptId()})
	if err != nil || !proto.Equal(got.GetReceipt(), rc) {
		t.Fatalf("GetReceipt: %v %v, want %v", got.GetReceipt(), err, rc)
	}
	// The confirmed ALLOW is cached now; it never answers alice alone.
	forbidden("alice's own token alone, after a confirmed ALLOW")
}

// TestLeaseInlineCheckNeedsAConfirmer (issue 20, point 2): LeaseService.Issue
// with an inline Check in MODE_USER_CONFIRMED from alice's own token is
// refused (PERMISSION_DENIED DECISION_NOT_ALLOW: admission denied it
// FORBIDDEN); with a tenant-a user's token in the confirmer header too;
// with a confirmer of the platform tenant beside alice's token (the lease
// service forwards it to admission) the lease is issued.
func TestLeaseInlineCheckNeedsAConfirmer(t *testing.T) {
	w := leaseworld.Start(t, time.Minute)
	w.Allow(t, 1)
	digest, err := lease.ArgumentDigest(leaseworld.ShipmentArgs)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(opts ...grpc.CallOption) (*leasev1.IssueResponse, error) {
		return w.Lease["alice"].Issue(ctxFor(t), &leasev1.IssueRequest{
			Check: &admissionv1.CheckRequest{ToolId: leaseworld.ToolID, Generation: 1, DescriptorDigest: w.Digest,
				Arguments: leaseworld.ShipmentArgs, Mode: admissionv1.Mode_MODE_USER_CONFIRMED, AudienceClass: leaseworld.Class},
			ArgumentDigest: digest, HolderPublicKey: w.JWK, Audience: leaseworld.Audience}, opts...)
	}
	as := func(tok string) grpc.CallOption { return grpc.PerRPCCredentials(principal.ConfirmerToken(tok)) }
	for _, tc := range []struct {
		name string
		opts []grpc.CallOption
	}{
		{"alice's own token alone", nil},
		{"a tenant-a user as confirmer", []grpc.CallOption{as(w.St.Auth.User(t, "bob", leaseworld.Tenant, servicetest.ConfirmerGroup))}},
	} {
		iss, err := issue(tc.opts...)
		if code, reason := leaseworld.CodeReason(err); code != codes.PermissionDenied || reason != "DECISION_NOT_ALLOW" ||
			!strings.Contains(err.Error(), "FORBIDDEN") {
			t.Fatalf("%s: Issue = %v, %v (%v %s); want PERMISSION_DENIED DECISION_NOT_ALLOW (FORBIDDEN)", tc.name, iss, err, code, reason)
		}
	}
	iss, err := issue(as(w.St.Auth.Confirmer(t)))
	if err != nil || iss.GetToken() == "" {
		t.Fatalf("Issue confirmed by a confirmer: %v %v", iss, err)
	}
}

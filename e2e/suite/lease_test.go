package suite

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	"github.com/toolcrib/toolcrib/e2e/stack"
	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/revision/lease"
	"github.com/toolcrib/toolcrib/services/admission"
	"github.com/toolcrib/toolcrib/services/discovery"
	leasesvc "github.com/toolcrib/toolcrib/services/lease"
)

// leaseWorld is the real registry, discovery, admission and lease services
// with one versioned MCP server whose READ_ONLY tool is approved and
// enabled for tenant-a's readers.
type leaseWorld struct {
	st     *stack.Stack
	srv    *fixture.Server
	adm    map[string]admissionv1.AdmissionServiceClient
	lease  map[string]leasev1.LeaseServiceClient
	admin  leasev1.LeaseServiceClient
	digest string // shipment_status's descriptor digest
	holder ed25519.PrivateKey
	jwk    []byte
}

const cacheTTL = 3 * time.Second

func startLeaseWorld(t *testing.T, cacheTTL time.Duration) *leaseWorld {
	t.Helper()
	ctx := ctxFor(t)
	st := stack.Start(t, stack.Options{Discovery: func(c *discovery.Config) { c.Linger = 0 }})
	srv, err := fixture.New(fixture.Script{Name: "inventory", Versioned: true,
		Tools: []fixture.Tool{shipmentStatus("Query the current status of a shipment.")}}, nil)
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
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(reg.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: &registryv1.Server{
		ServerId: serverID, Owner: tenant + "/group:inventory-team",
		Transport:      &registryv1.Server_StreamableHttp{StreamableHttp: &registryv1.StreamableHttpTransport{Url: ep.URL}},
		TrustLevel:     registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY,
		RevisionSource: registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED,
		ScanInterval:   durationpb.New(time.Hour),
	}}))
	must(reg.PutTenant(ctx, &registryv1.PutTenantRequest{Tenant: &registryv1.Tenant{TenantId: tenant}}))
	must(reg.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: &registryv1.AudienceClass{
		Name: class, TenantId: tenant, Servers: []*registryv1.AudienceServer{{ServerId: serverID}}}}))
	must(reg.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenant, Group: "readers",
		Scopes: []string{"shipment:read"}, AudienceClasses: []string{class}}))
	key := discovery.PointerKey{ServerID: serverID, AudienceClass: class}
	must(st.Discovery.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: serverID, AudienceClass: class}))
	if _, err := discovery.WaitPointers(ctx, st.Discovery, 0, []discovery.PointerKey{key}, nil); err != nil {
		t.Fatal(err)
	}
	active, err := st.Discovery.GetActiveSnapshot(ctx, &discoveryv1.GetActiveSnapshotRequest{ServerId: serverID, AudienceClass: class})
	if err != nil {
		t.Fatal(err)
	}
	w := &leaseWorld{st: st, srv: srv, digest: descriptorDigest(t, active.GetSnapshot(), "shipment_status"),
		adm: map[string]admissionv1.AdmissionServiceClient{}, lease: map[string]leasev1.LeaseServiceClient{}}
	eventually(t, "the registry learns the tool", func() bool {
		_, err := reg.GetTool(ctx, &registryv1.GetToolRequest{ToolId: toolID})
		return err == nil
	})
	pub, err := reg.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: &registryv1.ToolContract{
		ToolId: toolID, Effect: catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY, Scope: "shipment:read",
		Authorization: registryv1.Authorization_AUTHORIZATION_CALLER_AND_TENANT,
		AllowedFields: []string{"shipment_id", "status", "updated_at"}, RequiredEvidence: []string{"shipment_id"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	must(reg.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: toolID, ApprovalDigest: pub.GetTool().GetApprovalDigest()}))
	must(reg.EnableTool(ctx, &registryv1.EnableToolRequest{ToolId: toolID}))

	// Admission and lease, each with its own database, as dev up starts them.
	acfg, err := admission.ParseConfig(nil, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	acfg.RegistryAddr, acfg.DiscoveryAddr, acfg.CacheTTL = st.RegistryAddr, st.DiscoveryAddr, cacheTTL
	aurl := pgtest.NewDatabase(t, pgtest.Schema{Name: admission.Schema, Sets: admission.Migrations()})
	admAddr := servicetest.Start(t, func(ctx context.Context, listening func(string)) error {
		c := acfg
		c.Common = st.Auth.Common(t, aurl, true, listening)
		return admission.Run(ctx, c)
	})
	lcfg, err := leasesvc.ParseConfig([]string{"--key-file", filepath.Join(t.TempDir(), "keys.json")},
		func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	lcfg.AdmissionAddr, lcfg.RegistryAddr, lcfg.DiscoveryAddr = admAddr, st.RegistryAddr, st.DiscoveryAddr
	lurl := pgtest.NewDatabase(t, pgtest.Schema{Name: leasesvc.Schema, Sets: leasesvc.Migrations()})
	leaseAddr := servicetest.Start(t, func(ctx context.Context, listening func(string)) error {
		c := lcfg
		c.Common = st.Auth.Common(t, lurl, true, listening)
		if err := c.Validate(); err != nil {
			return err
		}
		return leasesvc.Run(ctx, c)
	})
	for _, who := range []string{"alice", "bob"} {
		tok := st.Auth.User(t, who, tenant, "readers")
		w.adm[who] = admissionv1.NewAdmissionServiceClient(servicetest.Dial(t, admAddr, tok))
		w.lease[who] = leasev1.NewLeaseServiceClient(servicetest.Dial(t, leaseAddr, tok))
	}
	w.admin = leasev1.NewLeaseServiceClient(servicetest.Dial(t, leaseAddr, st.Auth.Admin(t)))
	pubKey, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	w.holder, w.jwk = priv, lease.PublicJWK(pubKey)
	return w
}

var shipmentArgs = []byte(`{"shipment_id":"S-1"}`)

func (w *leaseWorld) check(t *testing.T, who string, generation int64, args []byte) *admissionv1.CheckResponse {
	t.Helper()
	resp, err := w.adm[who].Check(ctxFor(t), &admissionv1.CheckRequest{ToolId: toolID, Generation: generation,
		DescriptorDigest: w.digest, Arguments: args, Mode: admissionv1.Mode_MODE_AUTONOMOUS, AudienceClass: class})
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	return resp
}

func (w *leaseWorld) allow(t *testing.T, generation int64) *admissionv1.CheckResponse {
	t.Helper()
	var resp *admissionv1.CheckResponse
	eventually(t, "an ALLOW from admission", func() bool {
		resp = w.check(t, "alice", generation, shipmentArgs)
		return resp.GetDecision() == admissionv1.Decision_DECISION_ALLOW
	})
	return resp
}

func (w *leaseWorld) issue(t *testing.T, who, receipt string) (*leasev1.IssueResponse, error) {
	digest, err := lease.ArgumentDigest(shipmentArgs)
	if err != nil {
		t.Fatal(err)
	}
	return w.lease[who].Issue(ctxFor(t), &leasev1.IssueRequest{ReceiptId: receipt, ArgumentDigest: digest,
		HolderPublicKey: w.jwk, Audience: "executor.inventory"})
}

func (w *leaseWorld) verify(t *testing.T, iss *leasev1.IssueResponse) *leasev1.VerifyResponse {
	t.Helper()
	c := iss.GetClaims()
	proof, err := lease.NewProof(w.holder, lease.Claims{ID: c.GetLeaseId(), ArgumentDigest: c.GetArgumentDigest(), Audience: c.GetAudience()}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	resp, err := w.lease["alice"].Verify(ctxFor(t), &leasev1.VerifyRequest{Token: iss.GetToken(), Proof: proof,
		Audience: c.GetAudience(), ArgumentDigest: c.GetArgumentDigest(), ToolId: toolID})
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	return resp
}

func codeReason(err error) (codes.Code, string) {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return st.Code(), info.GetReason()
		}
	}
	return st.Code(), ""
}

func wantRefusal(t *testing.T, what string, err error, code codes.Code, reason string) {
	t.Helper()
	if c, r := codeReason(err); c != code || r != reason {
		t.Errorf("%s: %v %q (%v), want %v %s", what, c, r, err, code, reason)
	}
}

// TestLeaseFromAdmissionReceipts issues leases by admission receipt through
// the real admission and lease APIs: alice's ALLOW gives a lease that
// verifies once; bob citing alice's receipt gets the NOT_FOUND a missing
// id gets (the lease forwards bob's own token to GetReceipt); a DENY
// receipt is DECISION_NOT_ALLOW; a receipt older than admission's
// decision-cache lifetime is DECISION_EXPIRED.
func TestLeaseFromAdmissionReceipts(t *testing.T) {
	w := startLeaseWorld(t, cacheTTL)
	allow := w.allow(t, 1)
	iss, err := w.issue(t, "alice", allow.GetReceipt().GetReceiptId())
	if err != nil {
		t.Fatalf("Issue from alice's ALLOW: %v", err)
	}
	if c := iss.GetClaims(); c.GetReceiptId() != allow.GetReceipt().GetReceiptId() || c.GetGeneration() != 1 ||
		c.GetDescriptorDigest() != w.digest || c.GetSubject() != "alice" ||
		c.GetExpiresAt().AsTime().After(allow.GetValidUntil().AsTime()) {
		t.Fatalf("claims %v for receipt %v", c, allow.GetReceipt())
	}
	if v := w.verify(t, iss); !v.GetValid() {
		t.Fatalf("first Verify: %v %s", v.GetFailure(), v.GetDetail())
	}
	if v := w.verify(t, iss); v.GetFailure() != leasev1.VerifyFailure_VERIFY_FAILURE_ALREADY_USED {
		t.Fatalf("second Verify: %v", v.GetFailure())
	}

	_, err = w.issue(t, "bob", allow.GetReceipt().GetReceiptId())
	wantRefusal(t, "bob citing alice's receipt", err, codes.NotFound, "RECEIPT_NOT_FOUND")
	_, err = w.issue(t, "alice", uuid.NewString())
	wantRefusal(t, "a receipt id nobody was given", err, codes.NotFound, "RECEIPT_NOT_FOUND")

	deny := w.check(t, "alice", 1, []byte(`{"shipment_id":7}`))
	if deny.GetDecision() != admissionv1.Decision_DECISION_DENY {
		t.Fatalf("Check with a number for a string: %v", deny.GetReason())
	}
	_, err = w.issue(t, "alice", deny.GetReceipt().GetReceiptId())
	wantRefusal(t, "a DENY receipt", err, codes.PermissionDenied, "DECISION_NOT_ALLOW")

	old := w.allow(t, 1)
	time.Sleep(time.Until(old.GetReceipt().GetDecidedAt().AsTime().Add(cacheTTL + 200*time.Millisecond)))
	_, err = w.issue(t, "alice", old.GetReceipt().GetReceiptId())
	wantRefusal(t, "a receipt past its decision's lifetime", err, codes.FailedPrecondition, "DECISION_EXPIRED")
}

// TestLeaseFollowsPolicyAndRollback: a lease issued before the tenant's
// policy epoch moved is POLICY_CHANGED at Verify; a discovery Rollback
// (the RPC `toolcrib discovery rollback` sends), with no other call,
// freezes issuance for the server (Issue ISSUANCE_FROZEN, Verify FROZEN);
// after an operator resumes it, a lease bound to the rolled-back
// generation is STALE_CATALOG, and Issue works again.
func TestLeaseFollowsPolicyAndRollback(t *testing.T) {
	w := startLeaseWorld(t, time.Minute)
	ctx := ctxFor(t)
	first := w.allow(t, 1)
	before, err := w.issue(t, "alice", first.GetReceipt().GetReceiptId())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.st.Registry.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenant, Group: "auditors",
		Scopes: []string{"shipment:read"}, AudienceClasses: []string{class}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "admission sees the new epoch", func() bool {
		return w.check(t, "alice", 1, shipmentArgs).GetCurrentPolicyEpoch() > first.GetReceipt().GetPolicyEpoch()
	})
	time.Sleep(500 * time.Millisecond) // the lease's follower gets the same push
	if v := w.verify(t, before); v.GetFailure() != leasev1.VerifyFailure_VERIFY_FAILURE_POLICY_CHANGED {
		t.Fatalf("lease from epoch %d after the epoch moved: valid=%v %v", before.GetClaims().GetPolicyEpoch(), v.GetValid(), v.GetFailure())
	}

	// A second generation (a tool added; shipment_status unchanged).
	if _, err := w.srv.Apply(fixture.Upsert(reserve())); err != nil {
		t.Fatal(err)
	}
	key := discovery.PointerKey{ServerID: serverID, AudienceClass: class}
	if _, err := w.st.Discovery.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: serverID, AudienceClass: class}); err != nil {
		t.Fatal(err)
	}
	if _, err := discovery.WaitPointers(ctx, w.st.Discovery, 0, []discovery.PointerKey{key},
		func(p *discoveryv1.ActivePointer) bool { return p.GetGeneration() == 2 }); err != nil {
		t.Fatal(err)
	}
	second := w.allow(t, 2)
	onTwo, err := w.issue(t, "alice", second.GetReceipt().GetReceiptId())
	if err != nil {
		t.Fatal(err)
	}
	if onTwo.GetClaims().GetGeneration() != 2 {
		t.Fatalf("lease generation %d", onTwo.GetClaims().GetGeneration())
	}

	if _, err := w.st.Discovery.Rollback(ctx, &discoveryv1.RollbackRequest{ServerId: serverID, AudienceClass: class,
		ExpectedGeneration: 2, ToGeneration: 1, Reason: "bad release"}); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	eventually(t, "issuance frozen by the rollback", func() bool {
		_, err := w.issue(t, "alice", w.allow(t, 1).GetReceipt().GetReceiptId())
		if err == nil {
			return false
		}
		wantRefusal(t, "Issue after the rollback", err, codes.FailedPrecondition, "ISSUANCE_FROZEN")
		return true
	})
	if v := w.verify(t, onTwo); v.GetFailure() != leasev1.VerifyFailure_VERIFY_FAILURE_FROZEN {
		t.Fatalf("lease while frozen: valid=%v %v", v.GetValid(), v.GetFailure())
	}

	resumed, err := w.admin.FreezeIssuance(ctx, &leasev1.FreezeIssuanceRequest{ServerId: serverID, Frozen: false, Reason: "rollback reviewed"})
	if err != nil || resumed.GetFrozen() {
		t.Fatalf("resume: %v %v", resumed, err)
	}
	if v := w.verify(t, onTwo); v.GetFailure() != leasev1.VerifyFailure_VERIFY_FAILURE_STALE_CATALOG {
		t.Fatalf("lease on the rolled-back generation: valid=%v %v", v.GetValid(), v.GetFailure())
	}
	after, err := w.issue(t, "alice", w.allow(t, 1).GetReceipt().GetReceiptId())
	if err != nil {
		t.Fatalf("Issue after the resume: %v", err)
	}
	if v := w.verify(t, after); !v.GetValid() {
		t.Fatalf("lease on generation 1 after the resume: %v %s", v.GetFailure(), v.GetDetail())
	}
}

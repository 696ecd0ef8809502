package suite

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	"github.com/toolcrib/toolcrib/e2e/leaseworld"
	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/redisclient"
	"github.com/toolcrib/toolcrib/platform/redistest"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/revision/lease"
	"github.com/toolcrib/toolcrib/services/admission"
	"github.com/toolcrib/toolcrib/services/discovery"
	leasesvc "github.com/toolcrib/toolcrib/services/lease"
)

// guardBound is the most time the tests allow from the evidence (the last
// Check's receipt, or a lease presented at Verify) to lease issuance
// frozen for the server. What it is made of: admission's receipt batch
// (50 ms), the guard's interval (200 ms here), River's fetch of the
// periodic job (up to its 1 s poll), the move's commit, the lease
// replica's discovery Watch follow (a push; its heartbeat is 1 s) and the
// automatic freeze. Measured runs take about 1-2 s.
const guardBound = 8 * time.Second

// guardWorld is a lease world whose discovery runs the rollout guard every
// 200 ms with a threshold of 0.5 over at least 6 Checks; with ttl above 0
// snapshots prove their catalog for ttl only, and discovery scans only when
// told (no refresh proves them again).
func guardWorld(t *testing.T, ttl time.Duration) *leaseworld.World {
	return leaseworld.StartWith(t, leaseworld.Options{CacheTTL: time.Minute, Discovery: func(c *discovery.Config) {
		c.GuardInterval, c.GuardWindow, c.GuardMissingRate, c.GuardMinChecks = 200*time.Millisecond, time.Minute, 0.5, 6
		c.GuardPassed = func() { guardPasses.Add(1) }
		if ttl > 0 {
			c.SnapshotTTL, c.NoAutoScans = ttl, true
		}
	}})
}

// guardPasses counts the rollout-guard passes of every guard world (the
// guard tests do not run in parallel).
var guardPasses atomic.Int64

// waitGuardPasses returns once n more guard passes have run.
func waitGuardPasses(t *testing.T, n int64) {
	t.Helper()
	from := guardPasses.Load()
	servicetest.Eventually(t, 30*time.Second, fmt.Sprintf("%d rollout-guard passes", n), func() bool { return guardPasses.Load() >= from+n })
}

// scanTo applies the mutation to the world's server and waits for the
// generation it commits.
func scanTo(t *testing.T, w *leaseworld.World, gen int64, m fixture.Mutation) {
	t.Helper()
	ctx := ctxFor(t)
	if _, err := w.Srv.Apply(m); err != nil {
		t.Fatal(err)
	}
	if _, err := w.St.Discovery.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: serverID, AudienceClass: class}); err != nil {
		t.Fatal(err)
	}
	if _, err := discovery.WaitPointers(ctx, w.St.Discovery, 0, []discovery.PointerKey{{ServerID: serverID, AudienceClass: class}},
		func(p *discoveryv1.ActivePointer) bool { return p.GetGeneration() == gen }); err != nil {
		t.Fatal(err)
	}
}

// checkTool asks admission as alice for a tool at a plan generation.
func checkTool(t *testing.T, w *leaseworld.World, tool string, gen int64) *admissionv1.CheckResponse {
	t.Helper()
	resp, err := w.Adm["alice"].Check(ctxFor(t), &admissionv1.CheckRequest{ToolId: tool, Generation: gen,
		DescriptorDigest: w.Digest, Arguments: leaseworld.ShipmentArgs, Mode: admissionv1.Mode_MODE_AUTONOMOUS, AudienceClass: class})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// missingChecks makes n Checks of inventory.reserve (a tool generation 2
// had and generation 3 dropped) planned with generation 2, each answered
// STALE_CATALOG ("the tool is gone from the active generation") against
// gen, alternating with ones planned with gen, each NOT_FOUND: both are missing-tool
// denials.
func missingChecks(t *testing.T, w *leaseworld.World, gen int64, n int) {
	t.Helper()
	for i := range n {
		plan, want := int64(2), catalogv1.DecisionReason_DECISION_REASON_STALE_CATALOG
		if i%2 == 1 {
			plan, want = gen, catalogv1.DecisionReason_DECISION_REASON_NOT_FOUND
		}
		r := checkTool(t, w, "inventory.reserve", plan)
		if r.GetReason() != want || r.GetReceipt().GetGeneration() != gen ||
			r.GetReceipt().GetServerId() != serverID || r.GetReceipt().GetAudienceClass() != class {
			t.Fatalf("Check of the dropped tool: %v %s, receipt %v", r.GetReason(), r.GetDetail(), r.GetReceipt())
		}
	}
}

// allowedChecks makes n Checks of shipment_status (in every generation),
// each ALLOW against gen.
func allowedChecks(t *testing.T, w *leaseworld.World, gen int64, n int) {
	t.Helper()
	for range n {
		if r := w.Check(t, "alice", gen, leaseworld.ShipmentArgs); r.GetDecision() != admissionv1.Decision_DECISION_ALLOW || r.GetReceipt().GetGeneration() != gen {
			t.Fatalf("Check of shipment_status: %v %s", r.GetReason(), r.GetDetail())
		}
	}
}

// generationsTwoAndThree commits generation 2 (reserve added) and 3
// (reserve dropped again) and returns admission's first ALLOW from 3.
func generationsTwoAndThree(t *testing.T, w *leaseworld.World) *admissionv1.CheckResponse {
	t.Helper()
	scanTo(t, w, 2, fixture.Upsert(leaseworld.Reserve()))
	scanTo(t, w, 3, fixture.Remove("reserve"))
	return w.Allow(t, 3)
}

// waitFrozen polls until Issue for the server is refused ISSUANCE_FROZEN
// (with a fresh receipt each time while one can be had) and returns when.
func waitFrozen(t *testing.T, w *leaseworld.World, receipt string) time.Time {
	t.Helper()
	var at time.Time
	servicetest.Eventually(t, 30*time.Second, "lease issuance frozen", func() bool {
		_, err := w.Issue(t, "alice", receipt)
		if c, r := leaseworld.CodeReason(err); c == codes.FailedPrecondition && r == "ISSUANCE_FROZEN" {
			at = time.Now()
			return true
		}
		return false
	})
	return at
}

func guardActions(t *testing.T, w *leaseworld.World) []*discoveryv1.GuardAction {
	t.Helper()
	resp, err := w.St.Discovery.ListGuardActions(ctxFor(t), &discoveryv1.ListGuardActionsRequest{ServerId: serverID})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetActions()
}

// TestGuardRollsBackOnMissingTools: generation 3 drops a tool generation 2
// had; Checks of it are NOT_FOUND. Below the threshold (2 of 8 Checks,
// 0.25 against 0.5) the guard does nothing; above it (10 of 16) it rolls
// the pointer back to generation 2 by CAS within [guardBound], which
// freezes lease issuance for the server; one guard action records the
// figures, the pair is held (more evidence moves nothing) until an
// operator resumes it.
func TestGuardRollsBackOnMissingTools(t *testing.T) {
	w := guardWorld(t, 0)
	ctx := ctxFor(t)
	beforeRollback := generationsTwoAndThree(t, w)

	allowedChecks(t, w, 3, 5) // with the Allow above: 6 ALLOW
	missingChecks(t, w, 3, 2)
	waitGuardPasses(t, 10) // with 2 of 8 missing
	if a := guardActions(t, w); len(a) != 0 {
		t.Fatalf("guard actions below the threshold: %v", a)
	}
	if p, err := w.St.Discovery.GetActiveSnapshot(ctx, &discoveryv1.GetActiveSnapshotRequest{ServerId: serverID,
		AudienceClass: class, ToolsPageSize: 1}); err != nil || p.GetPointer().GetGeneration() != 3 {
		t.Fatalf("pointer below the threshold: %v %v", p.GetPointer(), err)
	}

	missingChecks(t, w, 3, 8) // 10 of 16
	evidence := time.Now()
	frozen := waitFrozen(t, w, beforeRollback.GetReceipt().GetReceiptId())
	if took := frozen.Sub(evidence); took > guardBound {
		t.Fatalf("issuance frozen %s after the evidence, bound %s", took, guardBound)
	} else {
		t.Logf("issuance frozen %s after the last missing-tool Check", took)
	}
	p, err := w.St.Discovery.GetActiveSnapshot(ctx, &discoveryv1.GetActiveSnapshotRequest{ServerId: serverID, AudienceClass: class, ToolsPageSize: 1})
	if err != nil || p.GetPointer().GetGeneration() != 2 || p.GetPointer().GetState() != discoveryv1.PointerState_POINTER_STATE_ACTIVE {
		t.Fatalf("pointer after the guard: %v %v", p.GetPointer(), err)
	}
	acts := guardActions(t, w)
	if len(acts) != 1 {
		t.Fatalf("guard actions: %v", acts)
	}
	a := acts[0]
	if a.GetRule() != discoveryv1.GuardRule_GUARD_RULE_MISSING_TOOL_RATE || a.GetMove() != catalogv1.PointerMove_POINTER_MOVE_ROLLBACK ||
		a.GetFromGeneration() != 3 || a.GetToGeneration() != 2 || a.GetPreviousGeneration() != 2 ||
		a.GetChecks() != 16 || a.GetMissing() != 10 || a.GetThreshold() != 0.5 ||
		len(a.GetMissingTools()) != 1 || a.GetMissingTools()[0] != "inventory.reserve" || a.GetResumedAt() != nil || a.GetReceiptId() == "" {
		t.Fatalf("guard action: %v", a)
	}

	// Held: more evidence (an incident) moves nothing until a resume.
	svc := discoveryv1.NewDiscoveryServiceClient(servicetest.Dial(t, w.St.DiscoveryAddr, w.St.Auth.Service(t)))
	if _, err := svc.ReportIncident(ctx, &discoveryv1.ReportIncidentRequest{EventId: "test:held", ServerId: serverID, AudienceClass: class,
		Kind: discoveryv1.IncidentKind_INCIDENT_KIND_ALLOW_DENIED_ON_RECHECK, Generation: 2, ObservedAt: timestamppb.Now()}); err != nil {
		t.Fatal(err)
	}
	servicetest.Eventually(t, 30*time.Second, "the incident attached to the hold", func() bool {
		acts = guardActions(t, w)
		return len(acts) == 1 && len(acts[0].GetIncidentIds()) == 1
	})
	if p, _ := w.St.Discovery.GetActiveSnapshot(ctx, &discoveryv1.GetActiveSnapshotRequest{ServerId: serverID, AudienceClass: class, ToolsPageSize: 1}); p.GetPointer().GetGeneration() != 2 {
		t.Fatalf("pointer moved while held: %v", p.GetPointer())
	}
	resumed, err := w.St.Discovery.ResumeGuard(ctx, &discoveryv1.ResumeGuardRequest{ServerId: serverID, AudienceClass: class, Reason: "dropped tool reviewed"})
	if err != nil || len(resumed.GetResumed()) != 1 || resumed.GetResumed()[0].GetResumedBy() == "" {
		t.Fatalf("ResumeGuard: %v %v", resumed, err)
	}
	waitGuardPasses(t, 5) // the evidence already acted on moves nothing again
	if acts := guardActions(t, w); len(acts) != 1 || acts[0].GetResumedAt() == nil {
		t.Fatalf("guard actions after the resume: %v", acts)
	}
	if again, err := w.St.Discovery.ResumeGuard(ctx, &discoveryv1.ResumeGuardRequest{ServerId: serverID, AudienceClass: class, Reason: "again"}); err != nil || len(again.GetResumed()) != 0 {
		t.Fatalf("second ResumeGuard: %v %v", again, err)
	}
}

// TestGuardClosesWithoutFreshGeneration: the same missing-tool evidence
// with no older generation still fresh closes the server instead, which
// freezes issuance: a lease of generation 3 issued before is FROZEN.
func TestGuardClosesWithoutFreshGeneration(t *testing.T) {
	const ttl = 8 * time.Second
	w := guardWorld(t, ttl)
	ctx := ctxFor(t)
	scanTo(t, w, 2, fixture.Upsert(leaseworld.Reserve()))
	gens, err := w.St.Discovery.ListGenerations(ctx, &discoveryv1.ListGenerationsRequest{ServerId: serverID, AudienceClass: class})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gens.GetGenerations() {
		time.Sleep(time.Until(g.GetExpiresAt().AsTime().Add(100 * time.Millisecond)))
	}
	scanTo(t, w, 3, fixture.Remove("reserve"))
	allow := w.Allow(t, 3)
	iss, err := w.Issue(t, "alice", allow.GetReceipt().GetReceiptId())
	if err != nil {
		t.Fatal(err)
	}
	allowedChecks(t, w, 3, 3)
	missingChecks(t, w, 3, 6) // 6 of 10
	evidence := time.Now()
	frozen := waitFrozen(t, w, allow.GetReceipt().GetReceiptId())
	if took := frozen.Sub(evidence); took > guardBound {
		t.Fatalf("issuance frozen %s after the evidence, bound %s", took, guardBound)
	} else {
		t.Logf("issuance frozen %s after the last missing-tool Check", took)
	}
	servicetest.Eventually(t, 30*time.Second, "the generation-3 lease refused FROZEN", func() bool {
		v := w.Verify(t, iss)
		if v.GetValid() {
			t.Fatal("a lease verified after issuance was frozen")
		}
		return v.GetFailure() == leasev1.VerifyFailure_VERIFY_FAILURE_FROZEN
	})
	p, err := w.St.Discovery.GetActiveSnapshot(ctx, &discoveryv1.GetActiveSnapshotRequest{ServerId: serverID, AudienceClass: class, ToolsPageSize: 1})
	if err != nil || p.GetPointer().GetState() != discoveryv1.PointerState_POINTER_STATE_CLOSED {
		t.Fatalf("pointer after the guard: %v %v", p.GetPointer(), err)
	}
	acts := guardActions(t, w)
	if len(acts) != 1 || acts[0].GetMove() != catalogv1.PointerMove_POINTER_MOVE_CLOSE || acts[0].GetFromGeneration() != 3 ||
		acts[0].GetToGeneration() != 3 || acts[0].GetRule() != discoveryv1.GuardRule_GUARD_RULE_MISSING_TOOL_RATE {
		t.Fatalf("guard actions: %v", acts)
	}
	if r := w.Check(t, "alice", 3, leaseworld.ShipmentArgs); r.GetReason() != catalogv1.DecisionReason_DECISION_REASON_SERVER_CLOSED {
		t.Fatalf("Check after the close: %v", r.GetReason())
	}
}

// TestGuardRPCsRefuseTenants: a tenant principal can neither read
// admission's decision counts nor report an incident, and an admin cannot
// report one either (services only).
func TestGuardRPCsRefuseTenants(t *testing.T) {
	w := guardWorld(t, 0)
	ctx := ctxFor(t)
	_, err := w.Adm["alice"].SummarizeDecisions(ctx, &admissionv1.SummarizeDecisionsRequest{ServerId: serverID, AudienceClass: class,
		Generation: 1, Since: timestamppb.New(time.Now().Add(-time.Minute))})
	if c, _ := leaseworld.CodeReason(err); c != codes.PermissionDenied {
		t.Fatalf("SummarizeDecisions as a tenant: %v", err)
	}
	admAsService := admissionv1.NewAdmissionServiceClient(servicetest.Dial(t, w.AdmissionAddr, w.St.Auth.Service(t)))
	w.Allow(t, 1)
	servicetest.Eventually(t, 30*time.Second, "the stored ALLOW counted", func() bool {
		s, err := admAsService.SummarizeDecisions(ctx, &admissionv1.SummarizeDecisionsRequest{ServerId: serverID, AudienceClass: class,
			Generation: 1, Since: timestamppb.New(time.Now().Add(-time.Minute))})
		if err != nil {
			t.Fatal(err)
		}
		return s.GetChecks() >= 1 && len(s.GetTools()) == 0
	})
	report := &discoveryv1.ReportIncidentRequest{EventId: "test:tenant", ServerId: serverID, AudienceClass: class,
		Kind: discoveryv1.IncidentKind_INCIDENT_KIND_LEASE_AFTER_REVOKE}
	alice := discoveryv1.NewDiscoveryServiceClient(servicetest.Dial(t, w.St.DiscoveryAddr, w.St.Auth.User(t, "alice", tenant, "readers")))
	for who, c := range map[string]discoveryv1.DiscoveryServiceClient{"tenant": alice, "admin": w.St.Discovery} {
		if _, err := c.ReportIncident(ctx, report); func() codes.Code { c, _ := leaseworld.CodeReason(err); return c }() != codes.PermissionDenied {
			t.Errorf("ReportIncident as %s: %v", who, err)
		}
	}
	if _, err := alice.ListGuardActions(ctx, &discoveryv1.ListGuardActionsRequest{}); func() codes.Code { c, _ := leaseworld.CodeReason(err); return c }() != codes.PermissionDenied {
		t.Errorf("ListGuardActions as a tenant: %v", err)
	}
	if a := guardActions(t, w); len(a) != 0 {
		t.Fatalf("guard actions: %v", a)
	}
}

// TestGuardRollsBackOnUnauthorizedLease: one unauthorized event rolls
// back and freezes. carol's only grant is revoked after admission allowed
// her call. A connected lease replica then refuses to issue from her ALLOW
// receipt (POLICY_CHANGED: Issue re-checks the receipt's epoch), but a
// second replica whose registry link stopped answering just before the
// revoke has not heard of it and, within its validity window, issues her a
// lease more than a second after the revocation committed. Presented at
// Verify on a
// replica that has seen the revocation, the lease is refused
// POLICY_CHANGED and reported to discovery once (event id
// `lease-after-revoke:<lease id>`); the guard rolls generation 2 back to 1
// and issuance for the server is frozen within [guardBound].
func TestGuardRollsBackOnUnauthorizedLease(t *testing.T) {
	w := guardWorld(t, 0)
	ctx := ctxFor(t)
	scanTo(t, w, 2, fixture.Upsert(leaseworld.Reserve()))
	aliceAllow := w.Allow(t, 2)
	if _, err := w.St.Registry.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenant, Subject: "carol",
		Scopes: []string{"shipment:read"}, AudienceClasses: []string{class}}); err != nil {
		t.Fatal(err)
	}
	carol := w.St.Auth.User(t, "carol", tenant)
	w.Adm["carol"] = admissionv1.NewAdmissionServiceClient(servicetest.Dial(t, w.AdmissionAddr, carol))
	w.Lease["carol"] = leasev1.NewLeaseServiceClient(servicetest.Dial(t, w.LeaseAddr, carol))
	var allow *admissionv1.CheckResponse
	servicetest.Eventually(t, 30*time.Second, "carol's ALLOW", func() bool {
		allow = w.Check(t, "carol", 2, leaseworld.ShipmentArgs)
		return allow.GetDecision() == admissionv1.Decision_DECISION_ALLOW
	})
	// A second lease replica whose registry link stops answering just
	// before the revoke: it does not hear of it, and within its validity
	// window (5 s) it still issues. A connected replica refuses the same
	// Issue (POLICY_CHANGED): that is the stale replica's lease.
	link := servicetest.NewProxy(t, w.St.RegistryAddr)
	stale := leasev1.NewLeaseServiceClient(servicetest.Dial(t,
		w.StartLeaseWith(t, func(c *leasesvc.Config) { c.RegistryAddr = link.Addr() }), carol))
	digest, err := lease.ArgumentDigest(leaseworld.ShipmentArgs)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(c leasev1.LeaseServiceClient, receipt string) (*leasev1.IssueResponse, error) {
		return c.Issue(ctx, &leasev1.IssueRequest{ReceiptId: receipt, ArgumentDigest: digest,
			HolderPublicKey: w.JWK, Audience: leaseworld.Audience})
	}
	// A receipt is redeemed once: the replica proves it issues on another
	// ALLOW of carol's, keeping hers for after the revocation.
	servicetest.Eventually(t, 30*time.Second, "the second lease replica issues", func() bool {
		_, err := issue(stale, w.Check(t, "carol", 2, leaseworld.ShipmentArgs).GetReceipt().GetReceiptId())
		return err == nil
	})
	// The connected replica is probed with a pre-revocation receipt of its
	// own: one it issued on before hearing of the revocation would be used
	// up, and carol's must stay unused for the stale replica.
	probe := w.Check(t, "carol", 2, leaseworld.ShipmentArgs)
	if probe.GetDecision() != admissionv1.Decision_DECISION_ALLOW {
		t.Fatalf("carol's second Check before the revocation: %v", probe.GetReason())
	}
	link.Freeze()
	if _, err := w.St.Registry.RevokeScopes(ctx, &registryv1.RevokeScopesRequest{TenantId: tenant, Subject: "carol",
		Scopes: []string{"shipment:read"}, AudienceClasses: []string{class}}); err != nil {
		t.Fatal(err)
	}
	servicetest.Eventually(t, 30*time.Second, "the connected replica refuses the pre-revocation receipt", func() bool {
		_, err := w.Issue(t, "carol", probe.GetReceipt().GetReceiptId())
		c, r := leaseworld.CodeReason(err)
		return c == codes.FailedPrecondition && r == "POLICY_CHANGED"
	})
	// A lease's iat is whole seconds, and the revocation must precede it
	// by more than the 1 s allowance.
	time.Sleep(2200 * time.Millisecond)
	iss, err := issue(stale, allow.GetReceipt().GetReceiptId())
	if err != nil {
		t.Fatalf("Issue from carol's pre-revocation receipt on the stale replica: %v", err)
	}
	link.Thaw()
	if iss.GetClaims().GetPolicyEpoch() != allow.GetReceipt().GetPolicyEpoch() {
		t.Fatalf("lease epoch %d, receipt's %d", iss.GetClaims().GetPolicyEpoch(), allow.GetReceipt().GetPolicyEpoch())
	}
	if v := w.Verify(t, iss); v.GetValid() || v.GetFailure() != leasev1.VerifyFailure_VERIFY_FAILURE_POLICY_CHANGED {
		t.Fatalf("the lease issued after the revocation at Verify: valid=%v %v", v.GetValid(), v.GetFailure())
	}
	evidence := time.Now()
	w.Verify(t, iss) // presented twice: still one incident
	frozen := waitFrozen(t, w, aliceAllow.GetReceipt().GetReceiptId())
	if took := frozen.Sub(evidence); took > guardBound {
		t.Fatalf("issuance frozen %s after the Verify, bound %s", took, guardBound)
	} else {
		t.Logf("issuance frozen %s after the Verify", took)
	}
	p, err := w.St.Discovery.GetActiveSnapshot(ctx, &discoveryv1.GetActiveSnapshotRequest{ServerId: serverID, AudienceClass: class, ToolsPageSize: 1})
	if err != nil || p.GetPointer().GetGeneration() != 1 || p.GetPointer().GetState() != discoveryv1.PointerState_POINTER_STATE_ACTIVE {
		t.Fatalf("pointer after the guard: %v %v", p.GetPointer(), err)
	}
	event := "lease-after-revoke:" + iss.GetClaims().GetLeaseId()
	acts := guardActions(t, w)
	if len(acts) != 1 || acts[0].GetRule() != discoveryv1.GuardRule_GUARD_RULE_UNAUTHORIZED_EVENT ||
		acts[0].GetMove() != catalogv1.PointerMove_POINTER_MOVE_ROLLBACK || acts[0].GetFromGeneration() != 2 || acts[0].GetToGeneration() != 1 ||
		len(acts[0].GetIncidentIds()) != 1 || acts[0].GetIncidentIds()[0] != event {
		t.Fatalf("guard actions: %v", acts)
	}
	svc := discoveryv1.NewDiscoveryServiceClient(servicetest.Dial(t, w.St.DiscoveryAddr, w.St.Auth.Service(t)))
	again, err := svc.ReportIncident(ctx, &discoveryv1.ReportIncidentRequest{EventId: event, ServerId: serverID, AudienceClass: class,
		Kind: discoveryv1.IncidentKind_INCIDENT_KIND_LEASE_AFTER_REVOKE})
	if err != nil || !again.GetDuplicate() || again.GetIncident().GetActionId() != acts[0].GetActionId() ||
		again.GetIncident().GetGeneration() != 2 || again.GetIncident().GetTenantId() != tenant {
		t.Fatalf("the same event reported again: %v %v", again, err)
	}
}

// TestGuardRollsBackOnTamperedCachedAllow: the other unauthorized event.
// Admission decides inventory.reserve (proven in generation 2, never
// enabled) DISABLED and caches it in Redis; the Redis entry is
// rewritten to ALLOW; a second admission replica over the same decision
// cache answers ALLOW from it, its auditor (--audit-rate 1) re-decides
// from direct reads at the same epoch, gets DISABLED and reports it; the
// guard rolls generation 2 back to 1 and issuance is frozen within
// [guardBound].
func TestGuardRollsBackOnTamperedCachedAllow(t *testing.T) {
	w := guardWorld(t, 0)
	ctx := ctxFor(t)
	scanTo(t, w, 2, fixture.Upsert(leaseworld.Reserve()))
	aliceAllow := w.Allow(t, 2)
	if r := checkTool(t, w, "inventory.reserve", 2); r.GetReason() != catalogv1.DecisionReason_DECISION_REASON_DISABLED {
		t.Fatalf("Check of the unapproved tool: %v %s", r.GetReason(), r.GetDetail())
	}
	rdb := redisclient.Open(redistest.Addr(), w.AdmissionRedisPrefix)
	defer rdb.Close()
	var forgedKey string
	servicetest.Eventually(t, 30*time.Second, "the DISABLED decision in Redis", func() bool {
		keys, err := rdb.Keys(ctx, w.AdmissionRedisPrefix+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			raw, err := rdb.Get(ctx, k).Bytes()
			if err != nil {
				continue
			}
			var e map[string]any
			if json.Unmarshal(raw, &e) == nil && e["r"] == float64(catalogv1.DecisionReason_DECISION_REASON_DISABLED) {
				e["r"], e["d"] = int(catalogv1.DecisionReason_DECISION_REASON_ALLOW), ""
				forged, _ := json.Marshal(e)
				if err := rdb.Set(ctx, k, forged, time.Minute).Err(); err != nil {
					t.Fatal(err)
				}
				forgedKey = k
				return true
			}
		}
		return false
	})
	second := w.StartAdmissionSharingL2(t, func(c *admission.Config) { c.AuditRate = 1 })
	adm := admissionv1.NewAdmissionServiceClient(servicetest.Dial(t, second, w.St.Auth.User(t, "alice", tenant, "readers")))
	resp, err := adm.Check(ctx, &admissionv1.CheckRequest{ToolId: "inventory.reserve", Generation: 2, DescriptorDigest: w.Digest,
		Arguments: leaseworld.ShipmentArgs, Mode: admissionv1.Mode_MODE_AUTONOMOUS, AudienceClass: class})
	if err != nil || resp.GetDecision() != admissionv1.Decision_DECISION_ALLOW {
		t.Fatalf("the second replica from the forged entry %s: %v %v", forgedKey, resp.GetReason(), err)
	}
	evidence := time.Now()
	frozen := waitFrozen(t, w, aliceAllow.GetReceipt().GetReceiptId())
	if took := frozen.Sub(evidence); took > guardBound {
		t.Fatalf("issuance frozen %s after the forged ALLOW, bound %s", took, guardBound)
	} else {
		t.Logf("issuance frozen %s after the forged ALLOW", took)
	}
	acts := guardActions(t, w)
	if len(acts) != 1 || acts[0].GetRule() != discoveryv1.GuardRule_GUARD_RULE_UNAUTHORIZED_EVENT || acts[0].GetFromGeneration() != 2 ||
		acts[0].GetToGeneration() != 1 || len(acts[0].GetIncidentIds()) != 1 ||
		acts[0].GetIncidentIds()[0] != "allow-recheck:"+resp.GetReceipt().GetReceiptId() {
		t.Fatalf("guard actions: %v", acts)
	}
}

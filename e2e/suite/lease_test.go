package suite

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	"github.com/toolcrib/toolcrib/e2e/leaseworld"
	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/discovery"
)

const cacheTTL = 3 * time.Second

func wantRefusal(t *testing.T, what string, err error, code codes.Code, reason string) {
	t.Helper()
	if c, r := leaseworld.CodeReason(err); c != code || r != reason {
		t.Errorf("%s: %v %q (%v), want %v %s", what, c, r, err, code, reason)
	}
}

// TestLeaseFromAdmissionReceipts issues leases by admission receipt through
// the real admission and lease APIs: alice's ALLOW gives a lease that
// verifies once, and a second Issue on that receipt is
// RECEIPT_ALREADY_USED; bob citing alice's receipt gets the NOT_FOUND a missing
// id gets (the lease forwards bob's own token to GetReceipt); a DENY
// receipt is DECISION_NOT_ALLOW; a receipt older than admission's
// decision-cache lifetime is DECISION_EXPIRED.
func TestLeaseFromAdmissionReceipts(t *testing.T) {
	w := leaseworld.Start(t, cacheTTL)
	allow := w.Allow(t, 1)
	iss, err := w.Issue(t, "alice", allow.GetReceipt().GetReceiptId())
	if err != nil {
		t.Fatalf("Issue from alice's ALLOW: %v", err)
	}
	if c := iss.GetClaims(); c.GetReceiptId() != allow.GetReceipt().GetReceiptId() || c.GetGeneration() != 1 ||
		c.GetDescriptorDigest() != w.Digest || c.GetSubject() != "alice" ||
		c.GetExpiresAt().AsTime().After(allow.GetValidUntil().AsTime()) {
		t.Fatalf("claims %v for receipt %v", c, allow.GetReceipt())
	}
	if v := w.Verify(t, iss); !v.GetValid() {
		t.Fatalf("first Verify: %v %s", v.GetFailure(), v.GetDetail())
	}
	if v := w.Verify(t, iss); v.GetFailure() != leasev1.VerifyFailure_VERIFY_FAILURE_ALREADY_USED {
		t.Fatalf("second Verify: %v", v.GetFailure())
	}
	_, err = w.Issue(t, "alice", allow.GetReceipt().GetReceiptId())
	wantRefusal(t, "a second Issue on alice's receipt", err, codes.FailedPrecondition, "RECEIPT_ALREADY_USED")

	_, err = w.Issue(t, "bob", allow.GetReceipt().GetReceiptId())
	wantRefusal(t, "bob citing alice's receipt", err, codes.NotFound, "RECEIPT_NOT_FOUND")
	_, err = w.Issue(t, "alice", uuid.NewString())
	wantRefusal(t, "a receipt id nobody was given", err, codes.NotFound, "RECEIPT_NOT_FOUND")

	deny := w.Check(t, "alice", 1, []byte(`{"shipment_id":7}`))
	if deny.GetDecision() != admissionv1.Decision_DECISION_DENY {
		t.Fatalf("Check with a number for a string: %v", deny.GetReason())
	}
	_, err = w.Issue(t, "alice", deny.GetReceipt().GetReceiptId())
	wantRefusal(t, "a DENY receipt", err, codes.PermissionDenied, "DECISION_NOT_ALLOW")

	old := w.Allow(t, 1)
	time.Sleep(time.Until(old.GetReceipt().GetDecidedAt().AsTime().Add(cacheTTL + 200*time.Millisecond)))
	_, err = w.Issue(t, "alice", old.GetReceipt().GetReceiptId())
	wantRefusal(t, "a receipt past its decision's lifetime", err, codes.FailedPrecondition, "DECISION_EXPIRED")
}

// TestLeaseFollowsPolicyAndRollback: a lease issued before the tenant's
// policy epoch moved is POLICY_CHANGED at Verify; a discovery Rollback
// (the RPC `toolcrib discovery rollback` sends), with no other call,
// freezes issuance for the server (Issue ISSUANCE_FROZEN, Verify FROZEN);
// after an operator resumes it, a lease bound to the rolled-back
// generation is STALE_CATALOG, and Issue works again. A lease of
// generation 1 stays valid once generation 2, with the tool unchanged, is
// active (compatible).
func TestLeaseFollowsPolicyAndRollback(t *testing.T) {
	w := leaseworld.Start(t, time.Minute)
	ctx := ctxFor(t)
	first := w.Allow(t, 1)
	before, err := w.Issue(t, "alice", first.GetReceipt().GetReceiptId())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.St.Registry.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenant, Group: "auditors",
		Scopes: []string{"shipment:read"}, AudienceClasses: []string{class}}); err != nil {
		t.Fatal(err)
	}
	servicetest.Eventually(t, 30*time.Second, "admission sees the new epoch", func() bool {
		return w.Check(t, "alice", 1, leaseworld.ShipmentArgs).GetCurrentPolicyEpoch() > first.GetReceipt().GetPolicyEpoch()
	})
	time.Sleep(500 * time.Millisecond) // the lease's follower gets the same push
	if v := w.Verify(t, before); v.GetFailure() != leasev1.VerifyFailure_VERIFY_FAILURE_POLICY_CHANGED {
		t.Fatalf("lease from epoch %d after the epoch moved: valid=%v %v", before.GetClaims().GetPolicyEpoch(), v.GetValid(), v.GetFailure())
	}

	onOne, err := w.Issue(t, "alice", w.Allow(t, 1).GetReceipt().GetReceiptId())
	if err != nil {
		t.Fatal(err)
	}
	// A second generation (a tool added; shipment_status unchanged).
	if _, err := w.Srv.Apply(fixture.Upsert(leaseworld.Reserve())); err != nil {
		t.Fatal(err)
	}
	key := discovery.PointerKey{ServerID: serverID, AudienceClass: class}
	if _, err := w.St.Discovery.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: serverID, AudienceClass: class}); err != nil {
		t.Fatal(err)
	}
	if _, err := discovery.WaitPointers(ctx, w.St.Discovery, 0, []discovery.PointerKey{key},
		func(p *discoveryv1.ActivePointer) bool { return p.GetGeneration() == 2 }); err != nil {
		t.Fatal(err)
	}
	second := w.Allow(t, 2)
	onTwo, err := w.Issue(t, "alice", second.GetReceipt().GetReceiptId())
	if err != nil {
		t.Fatal(err)
	}
	if onTwo.GetClaims().GetGeneration() != 2 {
		t.Fatalf("lease generation %d", onTwo.GetClaims().GetGeneration())
	}
	// A generation-2 lease verifies only once the lease's follower saw
	// generation 2; then the generation-1 lease is compatible (the tool's
	// descriptor is unchanged in generation 2).
	probe, err := w.Issue(t, "alice", w.Allow(t, 2).GetReceipt().GetReceiptId())
	if err != nil {
		t.Fatal(err)
	}
	servicetest.Eventually(t, 30*time.Second, "a generation-2 lease verifies", func() bool {
		v := w.Verify(t, probe) // a refusal does not consume it
		if !v.GetValid() && v.GetFailure() != leasev1.VerifyFailure_VERIFY_FAILURE_STALE_CATALOG {
			t.Fatalf("generation-2 lease: %v %s", v.GetFailure(), v.GetDetail())
		}
		return v.GetValid()
	})
	if v := w.Verify(t, onOne); !v.GetValid() {
		t.Fatalf("generation-1 lease with generation 2 active, tool unchanged: %v %s", v.GetFailure(), v.GetDetail())
	}

	if _, err := w.St.Discovery.Rollback(ctx, &discoveryv1.RollbackRequest{ServerId: serverID, AudienceClass: class,
		ExpectedGeneration: 2, ToGeneration: 1, Reason: "bad release"}); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	// Until the replica's freeze view has the freeze, a decision still made
	// at generation 2 is refused STALE_CATALOG (its pointer view moved
	// first); never issued.
	servicetest.Eventually(t, 30*time.Second, "issuance frozen by the rollback", func() bool {
		allow := w.Allow(t, 1)
		_, err := w.Issue(t, "alice", allow.GetReceipt().GetReceiptId())
		if err == nil {
			return false
		}
		if c, r := leaseworld.CodeReason(err); c == codes.FailedPrecondition && r == "STALE_CATALOG" && allow.GetReceipt().GetGeneration() == 2 {
			return false
		}
		wantRefusal(t, "Issue after the rollback", err, codes.FailedPrecondition, "ISSUANCE_FROZEN")
		return true
	})
	// The replica's freeze view reloads on a NOTIFY (at most 250 ms late)
	// while its pointer view may have moved already: until then the
	// generation-2 lease is refused STALE_CATALOG, never accepted.
	servicetest.Eventually(t, 30*time.Second, "the generation-2 lease refused FROZEN", func() bool {
		v := w.Verify(t, onTwo) // a refusal does not consume it
		if v.GetValid() || (v.GetFailure() != leasev1.VerifyFailure_VERIFY_FAILURE_FROZEN && v.GetFailure() != leasev1.VerifyFailure_VERIFY_FAILURE_STALE_CATALOG) {
			t.Fatalf("lease while frozen: valid=%v %v", v.GetValid(), v.GetFailure())
		}
		return v.GetFailure() == leasev1.VerifyFailure_VERIFY_FAILURE_FROZEN
	})

	resumed, err := w.Admin.FreezeIssuance(ctx, &leasev1.FreezeIssuanceRequest{ServerId: serverID, Frozen: false, Reason: "rollback reviewed"})
	if err != nil || resumed.GetFrozen() {
		t.Fatalf("resume: %v %v", resumed, err)
	}
	if v := w.Verify(t, onTwo); v.GetFailure() != leasev1.VerifyFailure_VERIFY_FAILURE_STALE_CATALOG {
		t.Fatalf("lease on the rolled-back generation: valid=%v %v", v.GetValid(), v.GetFailure())
	}
	after, err := w.Issue(t, "alice", w.Allow(t, 1).GetReceipt().GetReceiptId())
	if err != nil {
		t.Fatalf("Issue after the resume: %v", err)
	}
	if v := w.Verify(t, after); !v.GetValid() {
		t.Fatalf("lease on generation 1 after the resume: %v %s", v.GetFailure(), v.GetDetail())
	}
}

// TestLeaseFreezesOnClose: a discovery Rollback with no older fresh
// generation closes the pointer (a CLOSE move); with no other call that
// freezes issuance for the server: a lease issued before is FROZEN at
// Verify, and even after a new scan reopens the server at generation 2,
// Issue is ISSUANCE_FROZEN until an operator resumes it.
func TestLeaseFreezesOnClose(t *testing.T) {
	w := leaseworld.Start(t, time.Minute)
	ctx := ctxFor(t)
	// Leases issued before the close; until the lease replica sees the
	// close, a presented one may still pass (and is consumed), so each
	// poll presents the next.
	var before []*leasev1.IssueResponse
	for range 20 {
		iss, err := w.Issue(t, "alice", w.Allow(t, 1).GetReceipt().GetReceiptId())
		if err != nil {
			t.Fatal(err)
		}
		before = append(before, iss)
	}
	closed, err := w.St.Discovery.Rollback(ctx, &discoveryv1.RollbackRequest{ServerId: serverID, AudienceClass: class,
		ExpectedGeneration: 1, Reason: "nothing older to go back to"})
	if err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	if closed.GetPointer().GetState() != discoveryv1.PointerState_POINTER_STATE_CLOSED {
		t.Fatalf("pointer after rolling back generation 1: %v", closed.GetPointer())
	}
	next := 0
	servicetest.Eventually(t, 30*time.Second, "a lease refused FROZEN after the close", func() bool {
		if next == len(before) {
			t.Fatal("every lease issued before the close was used up before the freeze was seen")
		}
		v := w.Verify(t, before[next])
		switch {
		case v.GetFailure() == leasev1.VerifyFailure_VERIFY_FAILURE_FROZEN:
			return true
		case v.GetValid():
			next++ // the replica had not seen the close yet
			return false
		case v.GetFailure() == leasev1.VerifyFailure_VERIFY_FAILURE_STALE_CATALOG:
			return false // the close arrived, the freeze a moment later
		}
		t.Fatalf("lease after the close: %v %s", v.GetFailure(), v.GetDetail())
		return false
	})
	for _, iss := range before[next+1 : min(next+4, len(before))] {
		if v := w.Verify(t, iss); v.GetFailure() != leasev1.VerifyFailure_VERIFY_FAILURE_FROZEN {
			t.Fatalf("a lease after the freeze was seen: valid=%v %v", v.GetValid(), v.GetFailure())
		}
	}

	// A new proven scan reopens the server; issuance stays frozen.
	if _, err := w.Srv.Apply(fixture.Upsert(leaseworld.Reserve())); err != nil {
		t.Fatal(err)
	}
	if _, err := w.St.Discovery.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: serverID, AudienceClass: class}); err != nil {
		t.Fatal(err)
	}
	if _, err := discovery.WaitPointers(ctx, w.St.Discovery, 0, []discovery.PointerKey{{ServerID: serverID, AudienceClass: class}},
		func(p *discoveryv1.ActivePointer) bool {
			return p.GetGeneration() == 2 && p.GetState() != discoveryv1.PointerState_POINTER_STATE_CLOSED
		}); err != nil {
		t.Fatal(err)
	}
	reopened := w.Allow(t, 2)
	_, err = w.Issue(t, "alice", reopened.GetReceipt().GetReceiptId())
	wantRefusal(t, "Issue after the server reopened, not resumed", err, codes.FailedPrecondition, "ISSUANCE_FROZEN")

	if _, err := w.Admin.FreezeIssuance(ctx, &leasev1.FreezeIssuanceRequest{ServerId: serverID, Frozen: false, Reason: "close reviewed"}); err != nil {
		t.Fatal(err)
	}
	after, err := w.Issue(t, "alice", w.Allow(t, 2).GetReceipt().GetReceiptId())
	if err != nil {
		t.Fatalf("Issue after the resume: %v", err)
	}
	servicetest.Eventually(t, 30*time.Second, "a generation-2 lease verifies after the resume", func() bool {
		v := w.Verify(t, after)
		if !v.GetValid() && v.GetFailure() != leasev1.VerifyFailure_VERIFY_FAILURE_STALE_CATALOG {
			t.Fatalf("lease after the resume: %v %s", v.GetFailure(), v.GetDetail())
		}
		return v.GetValid()
	})
}

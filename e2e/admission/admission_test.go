package admission

import (
	"context"
	"sync"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/faultreport"
	"github.com/toolcrib/toolcrib/platform/redistest"
	"github.com/toolcrib/toolcrib/platform/servicetest"
)

const (
	allow         = catalogv1.DecisionReason_DECISION_REASON_ALLOW
	notFound      = catalogv1.DecisionReason_DECISION_REASON_NOT_FOUND
	stalePolicy   = catalogv1.DecisionReason_DECISION_REASON_STALE_POLICY
	policyRevoked = catalogv1.DecisionReason_DECISION_REASON_POLICY_REVOKED
	forbidden     = catalogv1.DecisionReason_DECISION_REASON_FORBIDDEN
)

// requireAllow checks once and fails unless the answer is ALLOW with a
// receipt binding the world's generation and digest and epoch.
func (w *world) requireAllow(t *testing.T, ctx context.Context, c admissionv1.AdmissionServiceClient, epoch int64) *admissionv1.CheckResponse {
	t.Helper()
	resp, err := w.check(ctx, c, epoch, "")
	if err != nil {
		t.Fatal(err)
	}
	rc := resp.GetReceipt()
	if resp.GetReason() != allow || resp.GetDecision() != admissionv1.Decision_DECISION_ALLOW ||
		rc.GetGeneration() != w.generation || rc.GetDescriptorDigest() != w.digest || rc.GetPolicyEpoch() != epoch ||
		rc.GetServerId() != serverID || rc.GetAudienceClass() != classA || rc.GetTenantId() != tenantA || rc.GetSubject() != "alice" ||
		resp.GetCurrentGeneration() != w.generation || resp.GetCurrentDescriptorDigest() != w.digest || resp.GetCurrentPolicyEpoch() != epoch {
		t.Fatalf("want ALLOW bound to generation %d, digest %s, epoch %d; got %v %q, receipt %v, current %d/%s/%d",
			w.generation, w.digest, epoch, resp.GetReason(), resp.GetDetail(), rc,
			resp.GetCurrentGeneration(), resp.GetCurrentDescriptorDigest(), resp.GetCurrentPolicyEpoch())
	}
	return resp
}

// TestRevokeWhileTwoReplicasServe: after grant → scan → publish, approve,
// enable, a Check is ALLOW with a receipt bound to the generation, digest
// and epoch. Then RevokeScopes while two replicas serve Checks
// continuously: on each replica the last ALLOW is decided within 1 s of the
// revoke, no ALLOW follows a denial, and the next Check planned at the old
// epoch is POLICY_REVOKED (FORBIDDEN when planned at the new epoch).
func TestRevokeWhileTwoReplicasServe(t *testing.T) {
	ctx := ctxFor(t)
	w := newWorld(t)
	reps := []*replica{w.startReplica(t, 5*time.Second), w.startReplica(t, 5*time.Second)}
	epoch := w.epoch(t)
	clients := make([]admissionv1.AdmissionServiceClient, len(reps))
	for i, r := range reps {
		clients[i] = w.client(t, r, "alice", tenantA)
		w.requireAllow(t, ctx, clients[i], epoch)
	}

	type tally struct {
		lastAllow, firstDeny time.Time
		allows               []time.Time
		allowAfterDeny       bool
		checks               int
		err                  error
	}
	tallies := make([]tally, len(reps))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tl := &tallies[i]
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := w.check(ctx, clients[i], epoch, "")
				if err != nil {
					tl.err = err
					return
				}
				tl.checks++
				at := resp.GetReceipt().GetDecidedAt().AsTime()
				if resp.GetReason() == allow {
					tl.allows = append(tl.allows, at)
					if !tl.firstDeny.IsZero() {
						tl.allowAfterDeny = true
					}
					tl.lastAllow = at
				} else if tl.firstDeny.IsZero() {
					tl.firstDeny = at
				}
			}
		}()
	}
	time.Sleep(200 * time.Millisecond) // both replicas are answering ALLOW
	revokeStart := time.Now()
	rv, err := w.st.Registry.RevokeScopes(ctx, &registryv1.RevokeScopesRequest{TenantId: tenantA, Subject: "alice", Scopes: []string{scope}})
	revokeDone := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // past the bound, both keep checking
	close(stop)
	wg.Wait()
	committed := w.committedAt(t, tenantA, rv.GetPolicyEpoch())
	if committed.Before(revokeStart.Add(-time.Second)) || committed.After(revokeDone.Add(time.Second)) {
		t.Fatalf("the revoke committed at %v, outside its call %v..%v", committed, revokeStart, revokeDone)
	}
	pastBound := 0
	for _, tl := range tallies {
		for _, at := range tl.allows {
			if at.Sub(committed) > time.Second {
				pastBound++
			}
		}
	}
	faultreport.Add(t, faultreport.AdmissionAllowAfterRevokeBound, int64(pastBound))
	for i, tl := range tallies {
		if tl.err != nil {
			t.Fatalf("replica %d: %v", i, tl.err)
		}
		if tl.firstDeny.IsZero() || tl.allowAfterDeny {
			t.Fatalf("replica %d: first deny %v, an ALLOW after a deny %v (%d checks)", i, tl.firstDeny, tl.allowAfterDeny, tl.checks)
		}
		lag := tl.lastAllow.Sub(revokeStart)
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		t.Logf("replica %d: %d checks; last ALLOW %.1f ms after the revoke committed (%.1f ms after it was sent, %.1f ms after it returned)",
			i, tl.checks, ms(tl.lastAllow.Sub(committed)), ms(lag), ms(tl.lastAllow.Sub(revokeDone)))
		if lag > time.Second {
			t.Errorf("replica %d: last ALLOW %v after the revoke, want ≤ 1 s", i, lag)
		}
	}

	for i, c := range clients {
		resp, err := w.check(ctx, c, epoch, "")
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetReason() != policyRevoked || resp.GetDecision() != admissionv1.Decision_DECISION_DENY ||
			resp.GetCurrentPolicyEpoch() != rv.GetPolicyEpoch() || resp.GetReceipt().GetPolicyEpoch() != rv.GetPolicyEpoch() {
			t.Fatalf("replica %d, planned at epoch %d: %v %q (current epoch %d, want %d)", i, epoch,
				resp.GetReason(), resp.GetDetail(), resp.GetCurrentPolicyEpoch(), rv.GetPolicyEpoch())
		}
		resp, err = w.check(ctx, c, rv.GetPolicyEpoch(), "")
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetReason() != forbidden {
			t.Fatalf("replica %d, planned at the new epoch %d: %v %q, want FORBIDDEN", i, rv.GetPolicyEpoch(), resp.GetReason(), resp.GetDetail())
		}
	}
	// A replica started after the revoke never saw the old epoch: it reads
	// the policy at the plan's epoch from the registry's history.
	// Its L2 is its own, so no decision of the other two answers it.
	late := w.client(t, w.startReplicaWithL2(t, 5*time.Second, redistest.NewPrefix(t)), "alice", tenantA)
	resp, err := w.check(ctx, late, epoch, "")
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetReason() != policyRevoked || resp.GetCurrentPolicyEpoch() != rv.GetPolicyEpoch() {
		t.Fatalf("a replica started after the revoke, planned at epoch %d: %v %q", epoch, resp.GetReason(), resp.GetDetail())
	}
}

// TestFrozenWatchAnswersStalePolicy breaks one replica's links (both
// frozen: connections open, no byte passes; or only the discovery link
// cut): once the validity window has passed, every Check is STALE_POLICY
// and health is NOT_SERVING, never ALLOW; a second replica keeps allowing.
// After healing, the same process answers ALLOW again within a few
// windows, without a restart.
func TestFrozenWatchAnswersStalePolicy(t *testing.T) {
	for _, tc := range []struct {
		name        string
		break_, fix func(*replica)
	}{
		{"both links frozen", func(r *replica) { r.regLink.Freeze(); r.discLink.Freeze() },
			func(r *replica) { r.regLink.Thaw(); r.discLink.Thaw() }},
		{"discovery link cut", func(r *replica) { r.discLink.Sever() }, func(r *replica) { r.discLink.Heal() }},
	} {
		t.Run(tc.name, func(t *testing.T) { staleThenHealed(t, tc.break_, tc.fix) })
	}
}

func staleThenHealed(t *testing.T, breakLinks, fixLinks func(*replica)) {
	ctx := ctxFor(t)
	w := newWorld(t)
	const window = time.Second
	frozen, other := w.startReplica(t, window), w.startReplica(t, window)
	epoch := w.epoch(t)
	c, oc := w.client(t, frozen, "alice", tenantA), w.client(t, other, "alice", tenantA)
	w.requireAllow(t, ctx, c, epoch)
	w.requireAllow(t, ctx, oc, epoch)
	health := healthpb.NewHealthClient(servicetest.Dial(t, frozen.addr, ""))

	// The window runs from the newest heartbeat the replica received: one
	// may still arrive while the links are being broken, so the clock
	// starts once they are (CI saw an ALLOW 90 µs past a clock started
	// before the break).
	breakLinks(frozen)
	frozenAt := time.Now()
	var firstStale time.Time
	pastWindow := 0
	defer func() { faultreport.Add(t, faultreport.AdmissionAllowAfterWindow, int64(pastWindow)) }()
	for time.Since(frozenAt) < window+1500*time.Millisecond {
		resp, err := w.check(ctx, c, epoch, "")
		if err != nil {
			t.Fatal(err)
		}
		switch at := resp.GetReceipt().GetDecidedAt().AsTime(); {
		case resp.GetReason() == allow && at.Sub(frozenAt) > window:
			pastWindow++
			t.Fatalf("ALLOW %v after the links broke, past the %v window", at.Sub(frozenAt), window)
		case resp.GetReason() == stalePolicy:
			if firstStale.IsZero() {
				firstStale = at
			}
		case resp.GetReason() != allow:
			t.Fatalf("broken replica: %v %q", resp.GetReason(), resp.GetDetail())
		case !firstStale.IsZero():
			t.Fatal("ALLOW again after STALE_POLICY while the links are broken")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if firstStale.IsZero() {
		t.Fatal("never STALE_POLICY while the links are broken")
	}
	t.Logf("first STALE_POLICY %.0f ms after the links broke (window %v)", float64(firstStale.Sub(frozenAt).Microseconds())/1000, window)
	if hs, err := health.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || hs.GetStatus() == healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("broken replica's health: %v %v, want NOT_SERVING", hs.GetStatus(), err)
	}
	w.requireAllow(t, ctx, oc, epoch) // the other replica is unaffected

	healedAt := time.Now()
	fixLinks(frozen)
	// The follower and the gRPC redial back off at most one window each.
	deadline := healedAt.Add(6 * window)
	for {
		resp, err := w.check(ctx, c, epoch, "")
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetReason() == allow {
			break
		}
		if resp.GetReason() != stalePolicy || time.Now().After(deadline) {
			t.Fatalf("after healing: %v %q", resp.GetReason(), resp.GetDetail())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("ALLOW again %.0f ms after healing", float64(time.Since(healedAt).Microseconds())/1000)
	w.requireAllow(t, ctx, c, epoch)
	servicetest.WaitServing(t, frozen.addr, 5*time.Second)
}

// TestOtherTenantCannotHitTenantADecision: alice's ALLOW is cached in L1 of
// the replica that decided it and in the shared L2 (a second replica's
// first Check is answered from it); bob of tenant-b then asks both
// replicas for the same tool id, generation, digest and epoch: NOT_FOUND
// (the tool is not even confirmed to exist), and FORBIDDEN when he names
// tenant-a's class (DESIGN §7: decided from the class name, before any
// lookup); never ALLOW, never tenant-a's generation or digest echoed.
func TestOtherTenantCannotHitTenantADecision(t *testing.T) {
	ctx := ctxFor(t)
	w := newWorld(t)
	a, b := w.startReplica(t, 5*time.Second), w.startReplica(t, 5*time.Second)
	epoch := w.epoch(t)
	if n := w.l2Keys(t); n != 0 {
		t.Fatalf("%d keys in a fresh L2", n)
	}
	w.requireAllow(t, ctx, w.client(t, a, "alice", tenantA), epoch) // decided, L1 of a and L2
	if n := w.l2Keys(t); n == 0 {
		t.Fatal("tenant-a's decision is not in L2")
	}
	w.requireAllow(t, ctx, w.client(t, a, "alice", tenantA), epoch) // L1 of a
	w.requireAllow(t, ctx, w.client(t, b, "alice", tenantA), epoch) // L2, then L1 of b
	hits := 0
	defer func() { faultreport.Add(t, faultreport.AdmissionCrossTenantHits, int64(hits)) }()
	for _, r := range []*replica{a, b} {
		bob := w.client(t, r, "bob", tenantB)
		for class, want := range map[string]catalogv1.DecisionReason{"": notFound, classA: forbidden} {
			resp, err := w.check(ctx, bob, epoch, class)
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetDecision() == admissionv1.Decision_DECISION_ALLOW || resp.GetCurrentDescriptorDigest() != "" {
				hits++
			}
			if resp.GetReason() != want || resp.GetDecision() != admissionv1.Decision_DECISION_DENY ||
				resp.GetCurrentGeneration() != 0 || resp.GetCurrentDescriptorDigest() != "" || resp.GetReceipt().GetTenantId() != tenantB {
				t.Fatalf("bob (class %q): %v %q, current %d/%q, receipt tenant %q", class, resp.GetReason(), resp.GetDetail(),
					resp.GetCurrentGeneration(), resp.GetCurrentDescriptorDigest(), resp.GetReceipt().GetTenantId())
			}
		}
	}
}

package admission

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/e2e/leaseworld"
	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
	"github.com/toolcrib/toolcrib/platform/config"
	"github.com/toolcrib/toolcrib/platform/faultreport"
	"github.com/toolcrib/toolcrib/platform/redistest"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/revision/lease"
)

// leaseClient is a lease client of alice on the replica at addr.
func leaseClient(t *testing.T, w *leaseworld.World, addr string) leasev1.LeaseServiceClient {
	return leasev1.NewLeaseServiceClient(servicetest.Dial(t, addr, w.St.Auth.User(t, "alice", leaseworld.Tenant, "readers")))
}

// verifyAs presents iss with a holder proof made for (lease id, audience)
// to executor audience executor.
func verifyAs(t *testing.T, w *leaseworld.World, c leasev1.LeaseServiceClient, iss *leasev1.IssueResponse, proofFor *leasev1.IssueResponse, proofAudience, executor string) (*leasev1.VerifyResponse, error) {
	t.Helper()
	pc := proofFor.GetClaims()
	proof, err := lease.NewProof(w.Holder, lease.Claims{ID: pc.GetLeaseId(), ArgumentDigest: pc.GetArgumentDigest(), Audience: proofAudience}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Verify(ctx, &leasev1.VerifyRequest{Token: iss.GetToken(), Proof: proof, Audience: executor,
		ArgumentDigest: iss.GetClaims().GetArgumentDigest(), ToolId: leaseworld.ToolID})
}

func (tl *leaseTally) issue(t *testing.T, w *leaseworld.World) *leasev1.IssueResponse {
	t.Helper()
	iss, err := w.Issue(t, "alice", w.Allow(t, 1).GetReceipt().GetReceiptId())
	if err != nil {
		t.Fatal(err)
	}
	return iss
}

type leaseTally struct{ accepted int64 }

// TestLeaseReplayProofReuseAndAnotherAudience, with two lease replicas
// sharing Redis: the same lease and proof presented four times at once,
// twice on each replica, verify exactly once (the rest ALREADY_USED); a
// proof made for one lease does not carry another (PROOF_OTHER_LEASE); a
// lease carried to another executor audience is WRONG_AUDIENCE even with a
// proof made for that audience. A refusal of the last two does not consume
// the lease: presented properly it verifies once. Every acceptance beyond
// those counts as lease_reuse_accepted.
func TestLeaseReplayProofReuseAndAnotherAudience(t *testing.T) {
	w := leaseworld.StartWith(t, leaseworld.Options{CacheTTL: time.Minute})
	replicas := []leasev1.LeaseServiceClient{w.Lease["alice"], leaseClient(t, w, w.StartLease(t))}
	var tl leaseTally
	defer func() { faultreport.Add(t, faultreport.AdmissionLeaseReuseAccepted, tl.accepted) }()

	const leases = 10
	for i := range leases {
		iss := tl.issue(t, w)
		var mu sync.Mutex
		valid, used := 0, 0
		var wg sync.WaitGroup
		for j := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				v, err := verifyAs(t, w, replicas[j%2], iss, iss, leaseworld.Audience, leaseworld.Audience)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					t.Errorf("lease %d, Verify %d: %v", i, j, err)
				case v.GetValid():
					valid++
				case v.GetFailure() == leasev1.VerifyFailure_VERIFY_FAILURE_ALREADY_USED:
					used++
				default:
					t.Errorf("lease %d, Verify %d: %v %s", i, j, v.GetFailure(), v.GetDetail())
				}
			}()
		}
		wg.Wait()
		if valid > 1 {
			tl.accepted += int64(valid - 1)
		}
		if valid != 1 || used != 3 {
			t.Fatalf("lease %d presented 4 times at once on 2 replicas: %d valid, %d ALREADY_USED", i, valid, used)
		}
	}

	one, other := tl.issue(t, w), tl.issue(t, w)
	for _, c := range []struct {
		what          string
		iss, proofFor *leasev1.IssueResponse
		proofAud, exe string
		want          leasev1.VerifyFailure
	}{
		{"a proof of another lease", other, one, leaseworld.Audience, leaseworld.Audience, leasev1.VerifyFailure_VERIFY_FAILURE_PROOF_OTHER_LEASE},
		{"another executor audience", other, other, "executor.billing", "executor.billing", leasev1.VerifyFailure_VERIFY_FAILURE_WRONG_AUDIENCE},
		{"a proof for another audience", other, other, "executor.billing", leaseworld.Audience, leasev1.VerifyFailure_VERIFY_FAILURE_PROOF_WRONG_AUDIENCE},
	} {
		for i, r := range replicas {
			v, err := verifyAs(t, w, r, c.iss, c.proofFor, c.proofAud, c.exe)
			if err != nil {
				t.Fatal(err)
			}
			if v.GetValid() {
				tl.accepted++
			}
			if v.GetValid() || v.GetFailure() != c.want {
				t.Errorf("%s on replica %d: valid=%v %v, want %v", c.what, i, v.GetValid(), v.GetFailure(), c.want)
			}
		}
	}
	for _, iss := range []*leasev1.IssueResponse{one, other} {
		if v, err := verifyAs(t, w, replicas[1], iss, iss, leaseworld.Audience, leaseworld.Audience); err != nil || !v.GetValid() {
			t.Fatalf("a lease refused only for a wrong proof or audience, presented properly: %v %v", v.GetFailure(), err)
		}
		if v, _ := verifyAs(t, w, replicas[0], iss, iss, leaseworld.Audience, leaseworld.Audience); v.GetValid() {
			tl.accepted++
			t.Fatal("verified twice")
		}
	}
}

// TestLeaseSingleUseFailsClosedWithoutRedis: the lease service's Redis
// (where single use is recorded) goes away; a lease presented then is
// never valid (single use cannot be proven); once Redis is back the same
// lease verifies once and then is ALREADY_USED. An acceptance while Redis
// is away counts as lease_reuse_accepted.
func TestLeaseSingleUseFailsClosedWithoutRedis(t *testing.T) {
	link := servicetest.NewProxy(t, redistest.Addr())
	w := leaseworld.StartWith(t, leaseworld.Options{CacheTTL: time.Minute, Lease: func(c *config.Common) { c.RedisURL = "redis://" + link.Addr() }})
	var tl leaseTally
	defer func() { faultreport.Add(t, faultreport.AdmissionLeaseReuseAccepted, tl.accepted) }()
	iss := tl.issue(t, w)
	link.Sever()
	for i := range 3 {
		v, err := verifyAs(t, w, w.Lease["alice"], iss, iss, leaseworld.Audience, leaseworld.Audience)
		if err == nil && v.GetValid() {
			tl.accepted++
			t.Fatalf("Verify %d with Redis away: valid", i)
		}
		if err != nil {
			code, reason := leaseworld.CodeReason(err)
			t.Logf("Verify %d with Redis away: %v %s", i, code, reason)
		} else {
			t.Logf("Verify %d with Redis away: %v %s", i, v.GetFailure(), v.GetDetail())
		}
	}
	link.Heal()
	var v *leasev1.VerifyResponse
	servicetest.Eventually(t, 30*time.Second, "Verify after Redis is back", func() bool {
		var err error
		v, err = verifyAs(t, w, w.Lease["alice"], iss, iss, leaseworld.Audience, leaseworld.Audience)
		return err == nil
	})
	if !v.GetValid() {
		t.Fatalf("after Redis is back, a lease never verified: %v %s", v.GetFailure(), v.GetDetail())
	}
	if v, err := verifyAs(t, w, w.Lease["alice"], iss, iss, leaseworld.Audience, leaseworld.Audience); err != nil || v.GetFailure() != leasev1.VerifyFailure_VERIFY_FAILURE_ALREADY_USED {
		t.Fatalf("second Verify: %v %v", v.GetFailure(), err)
	}
}

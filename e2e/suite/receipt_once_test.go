package suite

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/toolcrib/toolcrib/e2e/leaseworld"
	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
	"github.com/toolcrib/toolcrib/platform/config"
	"github.com/toolcrib/toolcrib/platform/redistest"
	"github.com/toolcrib/toolcrib/platform/servicetest"
)

// TestOneDecisionOneLeaseAcrossLeaseReplicas (issue 20, point 3): eight
// Issues on one ALLOW receipt of alice's at once, alternating between two
// lease replicas over one database and one Redis, through the real
// registry, discovery, admission and lease services: exactly one lease,
// which verifies; the other seven are FAILED_PRECONDITION
// RECEIPT_ALREADY_USED. The next Check's receipt issues as usual.
func TestOneDecisionOneLeaseAcrossLeaseReplicas(t *testing.T) {
	w := leaseworld.Start(t, time.Minute)
	replicas := []leasev1.LeaseServiceClient{w.Lease["alice"], leaseworld.NewLeaseClient(t, w.St, w.StartLease(t), "alice")}
	// Both replicas issue (on receipts of their own) before the race.
	for i, r := range replicas {
		w.Lease["alice"] = r
		if _, err := w.Issue(t, "alice", w.Allow(t, 1).GetReceipt().GetReceiptId()); err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
	}
	allow := w.Allow(t, 1)
	const tries = 8
	answers := make([]string, tries)
	leases := make([]*leasev1.IssueResponse, tries)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			digest := allow.GetReceipt().GetArgumentDigest()
			iss, err := replicas[i%2].Issue(ctxFor(t), &leasev1.IssueRequest{ReceiptId: allow.GetReceipt().GetReceiptId(),
				ArgumentDigest: digest, HolderPublicKey: w.JWK, Audience: leaseworld.Audience})
			code, reason := leaseworld.CodeReason(err)
			answers[i], leases[i] = fmt.Sprintf("%v %s", code, reason), iss
		}()
	}
	close(start)
	wg.Wait()
	var issued []*leasev1.IssueResponse
	used := 0
	for i, a := range answers {
		switch a {
		case codes.OK.String() + " ":
			issued = append(issued, leases[i])
		case codes.FailedPrecondition.String() + " RECEIPT_ALREADY_USED":
			used++
		default:
			t.Errorf("Issue %d on replica %d: %s", i, i%2, a)
		}
	}
	if len(issued) != 1 || used != tries-1 {
		t.Fatalf("%d leases and %d RECEIPT_ALREADY_USED from %d Issues on one receipt over two replicas; want 1 and %d",
			len(issued), used, tries, tries-1)
	}
	if v := w.Verify(t, issued[0]); !v.GetValid() {
		t.Fatalf("the one lease: %v %s", v.GetFailure(), v.GetDetail())
	}
	if _, err := w.Issue(t, "alice", w.Allow(t, 1).GetReceipt().GetReceiptId()); err != nil {
		t.Fatalf("Issue on the next Check's receipt: %v", err)
	}
}

// TestTheReceiptIsSingleUseWithoutTheLeaseRedis: a receipt's single use
// is the execution receipt's commit in Postgres (issue 24: one round trip
// fewer per Issue, and not forgotten by a Redis that restarts), so with
// the lease service's Redis unreachable an Issue on a fresh ALLOW receipt
// gets its lease and a second is RECEIPT_ALREADY_USED; the lease's own
// single use is Redis's, so presenting it fails closed (UNAVAILABLE
// LEDGER_UNAVAILABLE, never a pass) until Redis is back, and then it is
// accepted once.
func TestTheReceiptIsSingleUseWithoutTheLeaseRedis(t *testing.T) {
	link := servicetest.NewProxy(t, redistest.Addr())
	w := leaseworld.StartWith(t, leaseworld.Options{CacheTTL: time.Minute, Lease: func(c *config.Common) { c.RedisAddr = link.Addr() }})
	allow := w.Allow(t, 1)
	link.Sever()
	iss, err := w.Issue(t, "alice", allow.GetReceipt().GetReceiptId())
	if err != nil {
		t.Fatalf("Issue with Redis away: %v", err)
	}
	for i := range 3 {
		again, err := w.Issue(t, "alice", allow.GetReceipt().GetReceiptId())
		if err == nil {
			t.Fatalf("Issue %d on a used receipt with Redis away: a lease %s", i, again.GetClaims().GetLeaseId())
		}
		wantRefusal(t, fmt.Sprintf("Issue %d on a used receipt with Redis away", i), err, codes.FailedPrecondition, "RECEIPT_ALREADY_USED")
	}
	vreq := w.VerifyRequest(t, iss)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := w.Lease["alice"].Verify(ctx, vreq)
	if err == nil {
		t.Fatalf("Verify with Redis away answered %v: the lease's single use cannot be confirmed", v)
	}
	wantRefusal(t, "Verify with Redis away", err, codes.Unavailable, "LEDGER_UNAVAILABLE")
	link.Heal()
	servicetest.Eventually(t, 30*time.Second, "Verify after Redis is back", func() bool {
		v, err = w.Lease["alice"].Verify(ctx, vreq)
		if c, _ := leaseworld.CodeReason(err); err != nil && c != codes.Unavailable {
			t.Fatalf("Verify after Redis is back: %v", err)
		}
		return err == nil
	})
	if !v.GetValid() {
		t.Fatalf("the lease once Redis was back: %v %s", v.GetFailure(), v.GetDetail())
	}
}

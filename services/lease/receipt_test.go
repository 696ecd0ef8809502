package lease_test

import (
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
)

// TestOneReceiptOneLeaseAcrossReplicas: eight Issues on one ALLOW receipt
// at once, half on each of two replicas sharing Redis: exactly one lease
// and one execution receipt; every other answer is FAILED_PRECONDITION
// RECEIPT_ALREADY_USED. Refusals of the same receipt before (another
// principal, other arguments, a frozen server) did not use it up.
func TestOneReceiptOneLeaseAcrossReplicas(t *testing.T) {
	s := newSuite(t, 2)
	h := newHolder(t)
	s.allow("once")
	req := func() *leasev1.IssueRequest {
		return &leasev1.IssueRequest{ReceiptId: "once", ArgumentDigest: argDigest, HolderPublicKey: h.jwk, Audience: audience}
	}
	mallory := s.client(t, 1, s.auth.User(t, "mallory", tenant))
	if _, err := mallory.Issue(ctxT(t), req()); answer(err) != "PermissionDenied OTHER_PRINCIPAL" {
		t.Fatalf("mallory's Issue on alice's receipt = %v", err)
	}
	other := req()
	other.ArgumentDigest = "sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	if _, err := s.alice(t).Issue(ctxT(t), other); answer(err) != "FailedPrecondition ARGUMENTS_MISMATCH" {
		t.Fatalf("Issue for other arguments = %v", err)
	}
	if _, err := s.admin(t).FreezeIssuance(ctxT(t), &leasev1.FreezeIssuanceRequest{ServerId: server, Frozen: true, Reason: "drill"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.alice(t).Issue(ctxT(t), req()); answer(err) != "FailedPrecondition ISSUANCE_FROZEN" {
		t.Fatalf("Issue on a frozen server = %v", err)
	}
	if _, err := s.admin(t).FreezeIssuance(ctxT(t), &leasev1.FreezeIssuanceRequest{ServerId: server, Frozen: false}); err != nil {
		t.Fatal(err)
	}
	// Replica 1 sees the resume within its standing view's bound: a lease
	// on another receipt there says it has.
	s.allow("probe")
	probe := req()
	probe.ReceiptId = "probe"
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, err := s.client(t, 1, s.auth.User(t, subject, tenant)).Issue(ctxT(t), probe)
		if a := answer(err); a == "OK" {
			break
		} else if a != "FailedPrecondition ISSUANCE_FROZEN" || time.Now().After(deadline) {
			t.Fatalf("probe Issue on replica 1 after the resume: %s", a)
		}
	}

	clients := []leasev1.LeaseServiceClient{s.alice(t), s.client(t, 1, s.auth.User(t, subject, tenant))}
	const tries = 8
	answers := make([]string, tries)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := clients[i%2].Issue(ctxT(t), req())
			answers[i] = answer(err)
		}()
	}
	close(start)
	wg.Wait()
	issued, used := 0, 0
	for i, a := range answers {
		switch a {
		case "OK":
			issued++
		case "FailedPrecondition RECEIPT_ALREADY_USED":
			used++
		default:
			t.Errorf("Issue %d on replica %d: %s", i, i%2, a)
		}
	}
	if issued != 1 || used != tries-1 {
		t.Fatalf("%d leases and %d RECEIPT_ALREADY_USED from %d Issues on one receipt; want 1 and %d", issued, used, tries, tries-1)
	}
	if n := s.executionReceipts(t); n != 2 {
		t.Fatalf("%d execution receipts; want 2 (the probe's and the one lease's)", n)
	}
}

// answer is err's gRPC code and ErrorInfo reason ("OK" for nil).
func answer(err error) string {
	code, reason := errorReason(err)
	if code == codes.OK {
		return "OK"
	}
	return code.String() + " " + reason
}

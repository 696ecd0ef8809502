package suite

import (
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/toolcrib/toolcrib/e2e/leaseworld"
	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	admissionsvc "github.com/toolcrib/toolcrib/services/admission"
)

// TestLeaseOnAReceiptAnotherAdmissionReplicaDecided: two admission
// replicas over one database, each writing receipts every 300 ms; alice's
// Check is answered by A, and her Issue goes to a lease service whose
// admission connection lands on B before A stored the receipt. The lease
// is issued (B finds the receipt once A's batch is stored) and verifies.
func TestLeaseOnAReceiptAnotherAdmissionReplicaDecided(t *testing.T) {
	w := leaseworld.Start(t, time.Minute)
	slow := func(c *admissionsvc.Config) { c.ReceiptInterval = 300 * time.Millisecond }
	a := leaseworld.StartAdmission(t, w.St, time.Minute, w.AdmissionDB, slow)
	b := leaseworld.StartAdmission(t, w.St, time.Minute, w.AdmissionDB, slow)
	w.Adm["alice"] = admissionv1.NewAdmissionServiceClient(servicetest.Dial(t, a, w.St.Auth.User(t, "alice", leaseworld.Tenant, "readers")))
	w.Lease["alice"] = leaseworld.NewLeaseClient(t, w.St, leaseworld.StartLease(t, w.St, b), "alice")
	for i := range 3 {
		allow := w.Allow(t, 1)
		iss, err := w.Issue(t, "alice", allow.GetReceipt().GetReceiptId())
		if err != nil {
			t.Fatalf("Issue %d on B of a receipt decided on A: %v", i, err)
		}
		if iss.GetClaims().GetReceiptId() != allow.GetReceipt().GetReceiptId() {
			t.Fatalf("lease %d cites %s, want %s", i, iss.GetClaims().GetReceiptId(), allow.GetReceipt().GetReceiptId())
		}
		if v := w.Verify(t, iss); !v.GetValid() {
			t.Fatalf("Verify %d: %v %s", i, v.GetFailure(), v.GetDetail())
		}
	}
}

// TestSignedReceiptFromAnotherAdmissionReplicaNeedsNoLookup: two admission
// replicas sharing one receipt key file, each writing receipts only every
// 10 s; alice's Check is answered by A, and her Issue goes to a lease
// service whose admission connection lands on B, which has not stored the
// receipt. Issued by its signed receipt, the lease comes at once (no
// lookup, no NOT_FOUND window) and verifies; the same signed receipt again
// is RECEIPT_ALREADY_USED.
func TestSignedReceiptFromAnotherAdmissionReplicaNeedsNoLookup(t *testing.T) {
	w := leaseworld.Start(t, time.Minute)
	keys := filepath.Join(t.TempDir(), "receipt-keys.json")
	slow := func(c *admissionsvc.Config) { c.ReceiptInterval, c.ReceiptKeyFile = 10*time.Second, keys }
	a := leaseworld.StartAdmission(t, w.St, time.Minute, w.AdmissionDB, slow)
	b := leaseworld.StartAdmission(t, w.St, time.Minute, w.AdmissionDB, slow)
	w.Adm["alice"] = admissionv1.NewAdmissionServiceClient(servicetest.Dial(t, a, w.St.Auth.User(t, "alice", leaseworld.Tenant, "readers")))
	w.Lease["alice"] = leaseworld.NewLeaseClient(t, w.St, leaseworld.StartLease(t, w.St, b), "alice")
	for i := range 3 {
		allow := w.Allow(t, 1)
		if allow.GetSignedReceipt() == "" {
			t.Fatal("an ALLOW without a signed receipt")
		}
		start := time.Now()
		iss, err := w.IssueSigned(t, "alice", allow.GetSignedReceipt())
		if err != nil {
			t.Fatalf("Issue %d on B of a signed receipt decided on A: %v", i, err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("Issue %d took %v: it waited for a lookup", i, took)
		}
		if iss.GetClaims().GetReceiptId() != allow.GetReceipt().GetReceiptId() {
			t.Fatalf("lease %d cites %s, want %s", i, iss.GetClaims().GetReceiptId(), allow.GetReceipt().GetReceiptId())
		}
		if v := w.Verify(t, iss); !v.GetValid() {
			t.Fatalf("Verify %d: %v %s", i, v.GetFailure(), v.GetDetail())
		}
		_, err = w.IssueSigned(t, "alice", allow.GetSignedReceipt())
		if code, reason := leaseworld.CodeReason(err); code != codes.FailedPrecondition || reason != "RECEIPT_ALREADY_USED" {
			t.Fatalf("second Issue %d on the signed receipt: %v %s", i, code, reason)
		}
	}
}

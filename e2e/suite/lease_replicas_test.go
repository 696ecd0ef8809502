package suite

import (
	"testing"
	"time"

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

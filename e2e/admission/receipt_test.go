package admission

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	admissionsvc "github.com/toolcrib/toolcrib/services/admission"
)

// TestReceiptDecidedOnOneReplicaIsFoundOnTheOther: two replicas share
// Postgres; a receipt decided on A and not yet flushed (A writes its batch
// at most every receiptInterval) is looked up on B at once, as a lease
// service whose admission connection lands on B does. B must answer the
// receipt, not NOT_FOUND; and a receipt id that was never decided, or one of
// another principal, is still NOT_FOUND on both.
func TestReceiptDecidedOnOneReplicaIsFoundOnTheOther(t *testing.T) {
	w := newWorld(t)
	ctx := ctxFor(t)
	// A long interval makes the window between "decided on A" and "stored"
	// wide enough that the lookup on B lands in it nearly every time.
	const receiptInterval = 300 * time.Millisecond
	slow := func(c *admissionsvc.Config) { c.ReceiptInterval = receiptInterval }
	a := w.startReplicaWith(t, 5*time.Second, w.redisPrefix, slow)
	b := w.startReplicaWith(t, 5*time.Second, w.redisPrefix, slow)
	onA, onB := w.client(t, a, "alice", tenantA), w.client(t, b, "alice", tenantA)
	epoch := w.epoch(t)

	for i := range 5 {
		rc := w.requireAllow(t, ctx, onA, epoch).GetReceipt()
		start := time.Now()
		got, err := onB.GetReceipt(ctx, &admissionv1.GetReceiptRequest{ReceiptId: rc.GetReceiptId()})
		if err != nil {
			t.Fatalf("receipt %d decided on A, looked up on B after %s: %v", i, time.Since(start), err)
		}
		if !proto.Equal(stored(got.GetReceipt()), stored(rc)) {
			t.Fatalf("receipt %d on B differs:\n got %v\nwant %v", i, got.GetReceipt(), rc)
		}
		// And on A, from memory, the same.
		got, err = onA.GetReceipt(ctx, &admissionv1.GetReceiptRequest{ReceiptId: rc.GetReceiptId()})
		if err != nil || !proto.Equal(stored(got.GetReceipt()), stored(rc)) {
			t.Fatalf("receipt %d on A: %v %v", i, got.GetReceipt(), err)
		}
		if i > 0 {
			continue // each NOT_FOUND below takes the miss wait: once is enough
		}
		// Another principal never sees it, on either replica.
		for _, c := range []admissionv1.AdmissionServiceClient{w.client(t, a, "bob", tenantA), w.client(t, b, "alice", tenantB)} {
			if _, err := c.GetReceipt(ctx, &admissionv1.GetReceiptRequest{ReceiptId: rc.GetReceiptId()}); status.Code(err) != codes.NotFound {
				t.Fatalf("receipt %d looked up by another principal: %v", i, err)
			}
		}
	}
	// A receipt id nobody decided is NOT_FOUND on B, after a bounded wait.
	start := time.Now()
	_, err := onB.GetReceipt(ctx, &admissionv1.GetReceiptRequest{ReceiptId: "00000000-0000-4000-8000-000000000000"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("unknown receipt id: %v", err)
	}
	if took := time.Since(start); took > 10*receiptInterval {
		t.Fatalf("NOT_FOUND of an unknown receipt took %s, more than 10 receipt intervals", took)
	}
}

// stored is r as Postgres keeps it: decided_at to the microsecond.
func stored(r *admissionv1.Receipt) *admissionv1.Receipt {
	r = proto.Clone(r).(*admissionv1.Receipt)
	r.DecidedAt = timestamppb.New(r.GetDecidedAt().AsTime().Truncate(time.Microsecond))
	return r
}

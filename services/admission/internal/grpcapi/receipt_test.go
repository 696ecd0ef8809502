package grpcapi

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	"github.com/toolcrib/toolcrib/services/admission/internal/replica"
)

func codeReason(err error) (codes.Code, string) {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return st.Code(), info.GetReason()
		}
	}
	return st.Code(), ""
}

// TestGetReceiptIsPrincipalBound: the principal a receipt was issued to
// gets it at once (before the batch reached Postgres) and again after the
// flush; another subject of the same tenant, the same subject of another
// tenant and a missing id get the same NOT_FOUND RECEIPT_NOT_FOUND; a
// malformed or megabyte id is INVALID_ARGUMENT without a lookup.
func TestGetReceiptIsPrincipalBound(t *testing.T) {
	r := newRig(t, world(), nil)
	alice := r.client(t, "alice", "demo-a")
	resp := check(t, alice, okReq())
	id := resp.GetReceipt().GetReceiptId()
	ctx := context.Background()

	got, err := alice.GetReceipt(ctx, &admissionv1.GetReceiptRequest{ReceiptId: id})
	if err != nil {
		t.Fatalf("own receipt before the flush: %v", err)
	}
	if got.GetReceipt().GetDecision() != admissionv1.Decision_DECISION_ALLOW || got.GetReceipt().GetArgumentDigest() != resp.GetReceipt().GetArgumentDigest() {
		t.Fatalf("receipt %v, Check said %v", got.GetReceipt(), resp.GetReceipt())
	}
	vu := got.GetValidUntil().AsTime()
	if !vu.After(time.Now()) || vu.After(resp.GetReceipt().GetDecidedAt().AsTime().Add(time.Minute)) {
		t.Fatalf("valid_until %v (decided %v, cache TTL 1m)", vu, resp.GetReceipt().GetDecidedAt().AsTime())
	}
	soon := time.Now().Add(5 * time.Second)
	r.heads.SetPointer(replica.Pointer{ServerID: "logistics", Class: "demo-a.readers", Tenant: "demo-a", Generation: 7,
		FreshUntil: soon, Revision: 2})
	got, err = alice.GetReceipt(ctx, &admissionv1.GetReceiptRequest{ReceiptId: id})
	if err != nil || got.GetValidUntil().AsTime().After(soon) {
		t.Fatalf("valid_until %v past the pointer's fresh_until %v (%v)", got.GetValidUntil().AsTime(), soon, err)
	}
	if err := r.writer.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if r.writer.Pending() != 0 {
		t.Fatal("receipts still pending after Flush")
	}
	for _, who := range [][2]string{{"", ""}, {"bob", "demo-a"}, {"alice", "demo-b"}} {
		c, rid := alice, id
		if who[0] == "" {
			rid = uuid.NewString()
		} else {
			c = r.client(t, who[0], who[1])
		}
		_, err := c.GetReceipt(ctx, &admissionv1.GetReceiptRequest{ReceiptId: rid})
		if code, reason := codeReason(err); code != codes.NotFound || reason != ReasonReceiptNotFound {
			t.Errorf("%v: %v %q (%v), want NOT_FOUND %s", who, code, reason, err, ReasonReceiptNotFound)
		}
	}
	if _, err := alice.GetReceipt(ctx, &admissionv1.GetReceiptRequest{ReceiptId: id}); err != nil {
		t.Fatalf("own receipt after the flush: %v", err)
	}
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = 'a'
	}
	for _, bad := range []string{"", "not-a-uuid", string(big)} {
		_, err := alice.GetReceipt(ctx, &admissionv1.GetReceiptRequest{ReceiptId: bad})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("id of %d bytes: %v", len(bad), status.Code(err))
		}
	}
}

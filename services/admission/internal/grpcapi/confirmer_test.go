package grpcapi

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/redistest"
	"github.com/toolcrib/toolcrib/services/admission/internal/decision"
)

// TestOnlyAConfirmerAssertsAConfirmation (issue 20, point 2): a user's own
// token asking MODE_USER_CONFIRMED is FORBIDDEN, and so is a user's token,
// an admin's, a service's, or a confirmer group of another tenant in the
// confirmer header; a confirmer of the platform tenant beside the user's
// token is decided as usual, and the receipt (from Check and from
// GetReceipt) names the confirmer, the time and the shown digest. The
// decision cache never lets the confirmed ALLOW answer an unconfirmed
// request, before or after it was cached (I7).
func TestOnlyAConfirmerAssertsAConfirmation(t *testing.T) {
	r := newRig(t, world(), redistest.NewClient(t))
	alice := r.client(t, "alice", "demo-a")
	confirmed := func() *admissionv1.CheckRequest {
		req := okReq()
		req.Mode = admissionv1.Mode_MODE_USER_CONFIRMED
		return req
	}
	as := func(tok string) grpc.CallOption { return grpc.PerRPCCredentials(principal.ConfirmerToken(tok)) }
	forbidden := func(name string, resp *admissionv1.CheckResponse, why error) {
		t.Helper()
		want := decision.DetailNoConfirmer + ": " + why.Error()
		if resp.GetDecision() != admissionv1.Decision_DECISION_DENY || resp.GetReason() != decision.Forbidden || resp.GetDetail() != want {
			t.Fatalf("%s: %v %v %q, want FORBIDDEN %q", name, resp.GetDecision(), resp.GetReason(), resp.GetDetail(), want)
		}
		if rec := resp.GetReceipt(); rec.GetConfirmer() != "" || rec.GetConfirmedAt() != nil || rec.GetShownDigest() != "" {
			t.Fatalf("%s: the receipt names a confirmation: %v", name, rec)
		}
	}
	forbidden("user token alone", check(t, alice, confirmed()), principal.ErrNoConfirmer)

	for _, tc := range []struct {
		name string
		tok  string
	}{
		{"the user's own token as confirmer", r.auth.User(t, "alice", "demo-a")},
		{"a tenant user in the confirmer group", r.auth.User(t, "mallory", "demo-a", "toolcrib-confirmers")},
		{"an admin", r.auth.Admin(t)},
		{"a service", r.auth.Service(t)},
	} {
		resp, err := alice.Check(context.Background(), confirmed(), as(tc.tok))
		if err != nil {
			t.Fatal(err)
		}
		forbidden(tc.name, resp, principal.ErrNotConfirmer)
	}
	resp, err := alice.Check(context.Background(), confirmed(), as("not-a-token"))
	if err != nil {
		t.Fatal(err)
	}
	forbidden("an invalid confirmer token", resp, principal.ErrConfirmerInvalid)

	shown := "sha256:" + strings.Repeat("e", 64)
	req := confirmed()
	req.ShownDigest = shown
	for i := range 2 { // the second answer comes from the decision cache
		resp, err = alice.Check(context.Background(), req, as(r.auth.Confirmer(t)))
		if err != nil {
			t.Fatal(err)
		}
		rec := resp.GetReceipt()
		if resp.GetReason() != decision.Allow || rec.GetConfirmer() != "test-confirmer" || rec.GetShownDigest() != shown ||
			!proto.Equal(rec.GetConfirmedAt(), rec.GetDecidedAt()) || rec.GetMode() != admissionv1.Mode_MODE_USER_CONFIRMED {
			t.Fatalf("confirmed check %d: %v %q, receipt %v", i, resp.GetReason(), resp.GetDetail(), rec)
		}
	}
	got, err := alice.GetReceipt(context.Background(), &admissionv1.GetReceiptRequest{ReceiptId: resp.GetReceipt().GetReceiptId()})
	if err != nil || !proto.Equal(got.GetReceipt(), resp.GetReceipt()) {
		t.Fatalf("GetReceipt: %v %v, want %v", got.GetReceipt(), err, resp.GetReceipt())
	}
	// The confirmed ALLOW is cached; an unconfirmed request of the same
	// call is still FORBIDDEN, and an autonomous one is decided on its own.
	forbidden("user token alone after a confirmed ALLOW", check(t, alice, confirmed()), principal.ErrNoConfirmer)
	if resp := check(t, alice, okReq()); resp.GetReason() != decision.Allow || resp.GetReceipt().GetConfirmer() != "" {
		t.Fatalf("autonomous read: %v, receipt %v", resp.GetReason(), resp.GetReceipt())
	}
	// A megabyte shown digest is INVALID_INPUT naming the field, its value
	// never echoed, even from a confirmer.
	big := confirmed()
	big.ShownDigest = "sha256:" + strings.Repeat("e", 1<<20)
	resp, err = alice.Check(context.Background(), big, as(r.auth.Confirmer(t)))
	if err != nil || resp.GetReason() != decision.InvalidInput ||
		!strings.Contains(resp.GetDetail(), "shown_digest") || len(resp.GetDetail()) > 512 {
		t.Fatalf("a megabyte shown digest: %v %v %.200q", err, resp.GetReason(), resp.GetDetail())
	}
	// Without a shown digest the receipt names the confirmer and the time.
	resp, err = alice.Check(context.Background(), confirmed(), as(r.auth.Confirmer(t)))
	if err != nil || resp.GetReason() != decision.Allow || resp.GetReceipt().GetConfirmer() != "test-confirmer" || resp.GetReceipt().GetShownDigest() != "" {
		t.Fatalf("confirmed without a shown digest: %v %v", resp, err)
	}
}

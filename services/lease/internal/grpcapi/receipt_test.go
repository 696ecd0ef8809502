package grpcapi

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/postgres"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/revision/lease"
	"github.com/toolcrib/toolcrib/services/lease/admissionview"
	"github.com/toolcrib/toolcrib/services/lease/internal/keys"
	"github.com/toolcrib/toolcrib/services/lease/internal/ledger"
	"github.com/toolcrib/toolcrib/services/lease/internal/store"
	"github.com/toolcrib/toolcrib/services/lease/migrations"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
)

// inlineChecker answers every inline Check with one decision.
type inlineChecker struct{ d admissionview.Decision }

func (c inlineChecker) Check(context.Context, *admissionv1.CheckRequest) (admissionview.Decision, error) {
	return c.d, nil
}

// claimWorld is a lease server on a real lease database with a memory
// ledger, whose receipt lookup and inline Check both answer alice's ALLOW
// receipt "r".
type claimWorld struct {
	srv *Server
	led *ledger.Memory
	ctx context.Context
	arg string
	jwk []byte
}

func newClaimWorld(t *testing.T) claimWorld {
	t.Helper()
	ctx := principal.NewContext(context.Background(), principal.Principal{Subject: "alice", Tenant: "acme"})
	url := pgtest.NewDatabase(t, pgtest.Schema{Name: "lease", Sets: []postgres.Set{migrations.Set()}})
	pool, err := postgres.Open(ctx, url, "lease")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	ring, err := keys.NewRing(ctx, &keys.Memory{}, keys.Options{})
	if err != nil {
		t.Fatal(err)
	}
	arg, _ := lease.ArgumentDigest(nil)
	d := admissionview.Decision{
		Receipt: &admissionv1.Receipt{ReceiptId: "r", Decision: admissionv1.Decision_DECISION_ALLOW, Subject: "alice", TenantId: "acme",
			ToolId: "inv.x", ServerId: "inv", Generation: 1, DescriptorDigest: "sha256:" + strings.Repeat("d", 64), ArgumentDigest: arg},
		ValidUntil: time.Now().Add(10 * time.Second),
	}
	led := &ledger.Memory{}
	srv := New(Options{Store: store.New(pool), Ring: ring, Ledger: led, Receipts: oneReceipt{d}, Checker: inlineChecker{d}})
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	return claimWorld{srv: srv, led: led, ctx: ctx, arg: arg, jwk: lease.PublicJWK(pub)}
}

func (w claimWorld) issue(edit func(*leasev1.IssueRequest)) (*leasev1.IssueResponse, error) {
	req := &leasev1.IssueRequest{ReceiptId: "r", ArgumentDigest: w.arg, HolderPublicKey: w.jwk, Audience: "exec"}
	if edit != nil {
		edit(req)
	}
	return w.srv.Issue(w.ctx, req)
}

func wantAPIError(t *testing.T, what string, resp *leasev1.IssueResponse, err error, code codes.Code, reason string) {
	t.Helper()
	var ae *apierror.Error
	if resp != nil || !errors.As(err, &ae) || ae.Code != code || ae.Reason != reason {
		t.Fatalf("%s = %v, %v; want %s %s", what, resp, err, code, reason)
	}
}

// TestIssueRedeemsAReceiptOnce: the second Issue on one ALLOW receipt is
// FAILED_PRECONDITION RECEIPT_ALREADY_USED, and so is an Issue citing the
// receipt an inline Check produced (its id is in the first lease's claims).
func TestIssueRedeemsAReceiptOnce(t *testing.T) {
	w := newClaimWorld(t)
	if _, err := w.issue(nil); err != nil {
		t.Fatalf("first Issue: %v", err)
	}
	resp, err := w.issue(nil)
	wantAPIError(t, "second Issue on the receipt", resp, err, codes.FailedPrecondition, ReasonReceiptAlreadyUsed)

	w = newClaimWorld(t)
	inline := func(r *leasev1.IssueRequest) { r.ReceiptId, r.Check = "", &admissionv1.CheckRequest{ToolId: "inv.x"} }
	first, err := w.issue(inline)
	if err != nil {
		t.Fatalf("Issue with an inline Check: %v", err)
	}
	resp, err = w.issue(func(r *leasev1.IssueRequest) { r.ReceiptId = first.GetClaims().GetReceiptId() })
	wantAPIError(t, "Issue citing the inline Check's receipt", resp, err, codes.FailedPrecondition, ReasonReceiptAlreadyUsed)
}

// TestARefusedIssueDoesNotBurnTheReceipt: the claim is the last check, so
// an Issue refused for any other cause (here other arguments) leaves the
// receipt to its principal.
func TestARefusedIssueDoesNotBurnTheReceipt(t *testing.T) {
	w := newClaimWorld(t)
	resp, err := w.issue(func(r *leasev1.IssueRequest) { r.ArgumentDigest = "sha256:" + strings.Repeat("e", 64) })
	var refusal *apierror.Error
	if resp != nil || !errors.As(err, &refusal) || refusal.Reason != "ARGUMENTS_MISMATCH" {
		t.Fatalf("Issue with other arguments = %v, %v", resp, err)
	}
	if _, err := w.issue(nil); err != nil {
		t.Fatalf("Issue after a refused one: %v", err)
	}
}

// TestTheReceiptIsClaimedByItsLeasesRecord: the receipt's single use is
// the execution receipt's own commit (one row per admission receipt), so
// it holds with the single-use ledger (Redis) down: the first Issue gets
// its lease, the second is RECEIPT_ALREADY_USED, and Issue makes no ledger
// call at all.
func TestTheReceiptIsClaimedByItsLeasesRecord(t *testing.T) {
	w := newClaimWorld(t)
	w.led.SetDown(true)
	if _, err := w.issue(nil); err != nil {
		t.Fatalf("Issue with the ledger down: %v", err)
	}
	resp, err := w.issue(nil)
	wantAPIError(t, "second Issue with the ledger down", resp, err, codes.FailedPrecondition, ReasonReceiptAlreadyUsed)
	w.led.SetDown(false)
	resp, err = w.issue(nil)
	wantAPIError(t, "third Issue with the ledger back", resp, err, codes.FailedPrecondition, ReasonReceiptAlreadyUsed)
}

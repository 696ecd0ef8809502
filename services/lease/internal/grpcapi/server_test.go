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

type oneReceipt struct{ d admissionview.Decision }

func (o oneReceipt) Receipt(context.Context, string) (admissionview.Decision, error) { return o.d, nil }

// TestVerifyFailsClosedWhenTheLedgerIsDown: with the single-use ledger
// unreachable, Verify is UNAVAILABLE (LEDGER_UNAVAILABLE), never valid; the
// lease verifies once the ledger is back.
func TestVerifyFailsClosedWhenTheLedgerIsDown(t *testing.T) {
	ctx := principal.NewContext(context.Background(), principal.Principal{Subject: "alice", Tenant: "acme"})
	url := pgtest.NewDatabase(t, pgtest.Schema{Name: "lease", Sets: []postgres.Set{migrations.Set()}})
	pool, err := postgres.Open(ctx, url, "lease")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ring, err := keys.NewRing(ctx, &keys.Memory{}, keys.Options{})
	if err != nil {
		t.Fatal(err)
	}
	arg, _ := lease.ArgumentDigest(nil)
	led := &ledger.Memory{}
	srv := New(Options{Store: store.New(pool), Ring: ring, Ledger: led, Receipts: oneReceipt{admissionview.Decision{
		Receipt: &admissionv1.Receipt{ReceiptId: "r", Decision: admissionv1.Decision_DECISION_ALLOW, Subject: "alice", TenantId: "acme",
			ToolId: "inv.x", ServerId: "inv", Generation: 1, DescriptorDigest: "sha256:" + strings.Repeat("d", 64), ArgumentDigest: arg},
		ValidUntil: time.Now().Add(10 * time.Second),
	}}})
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	iss, err := srv.Issue(ctx, &leasev1.IssueRequest{ReceiptId: "r", ArgumentDigest: arg, HolderPublicKey: lease.PublicJWK(pub), Audience: "exec"})
	if err != nil {
		t.Fatal(err)
	}
	c := lease.Claims{ID: iss.GetClaims().GetLeaseId(), ArgumentDigest: arg, Audience: "exec"}
	verify := func() (*leasev1.VerifyResponse, error) {
		proof, _ := lease.NewProof(priv, c, time.Now())
		return srv.Verify(ctx, &leasev1.VerifyRequest{Token: iss.GetToken(), Proof: proof, Audience: "exec", ArgumentDigest: arg, ToolId: "inv.x"})
	}
	led.SetDown(true)
	resp, err := verify()
	var ae *apierror.Error
	if resp != nil || !errors.As(err, &ae) || ae.Code != codes.Unavailable || ae.Reason != ReasonLedgerUnavailable {
		t.Fatalf("Verify with the ledger down = %v, %v", resp, err)
	}
	led.SetDown(false)
	if resp, err := verify(); err != nil || !resp.GetValid() {
		t.Fatalf("Verify with the ledger back = %v, %v", resp, err)
	}
}

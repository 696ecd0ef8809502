package lease_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolcrib/toolcrib/platform/keyring"
	"github.com/toolcrib/toolcrib/platform/signedreceipt"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
)

// aliceAllow is an ALLOW receipt of alice's, decided now, as admission
// would sign it.
func aliceAllow() *admissionv1.Receipt {
	return &admissionv1.Receipt{
		ReceiptId: "rcpt-" + randomID(), Decision: admissionv1.Decision_DECISION_ALLOW, Reason: catalogv1.DecisionReason_DECISION_REASON_ALLOW,
		TenantId: tenant, Subject: subject, ToolId: toolID, ServerId: server, AudienceClass: class,
		Generation: 5, DescriptorDigest: "sha256:" + strings.Repeat("d", 64), PolicyEpoch: 3,
		ArgumentDigest: argDigest, Mode: admissionv1.Mode_MODE_AUTONOMOUS, DecidedAt: timestamppb.Now(),
	}
}

// sign signs r with key, valid until validUntil.
func sign(t *testing.T, key keyring.Key, r *admissionv1.Receipt, validUntil time.Time) string {
	t.Helper()
	tok, err := signedreceipt.Sign(key, r, validUntil)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// signed is r signed by the fake admission's current key, valid 20 s.
func (s *suite) signed(t *testing.T, r *admissionv1.Receipt) string {
	t.Helper()
	k, err := s.admKeys.ring.Current()
	if err != nil {
		t.Fatal(err)
	}
	return sign(t, k, r, time.Now().Add(20*time.Second))
}

func signedIssue(signed string, h holder) *leasev1.IssueRequest {
	return &leasev1.IssueRequest{SignedReceipt: signed, ArgumentDigest: argDigest, HolderPublicKey: h.jwk, Audience: audience}
}

// TestIssueBySignedReceiptNeedsNoLookup: a signed receipt admission's
// lookup has never heard of (decided on another admission replica a
// moment ago) gets its lease on either lease replica at once, bound to the
// signed decision; a second Issue on it, on the other replica, is
// RECEIPT_ALREADY_USED.
func TestIssueBySignedReceiptNeedsNoLookup(t *testing.T) {
	s := newSuite(t, 2)
	h := newHolder(t)
	r := aliceAllow()
	tok := s.signed(t, r)
	resp, err := s.alice(t).Issue(ctxT(t), signedIssue(tok, h))
	if err != nil {
		t.Fatalf("Issue by signed receipt: %v", err)
	}
	c := resp.GetClaims()
	if c.GetReceiptId() != r.GetReceiptId() || c.GetToolId() != toolID || c.GetGeneration() != 5 || c.GetPolicyEpoch() != 3 ||
		c.GetAudienceClass() != class || c.GetSubject() != subject || c.GetTenantId() != tenant {
		t.Fatalf("lease claims %v are not the signed decision's", c)
	}
	again := s.client(t, 1, s.auth.User(t, subject, tenant))
	if _, err := again.Issue(ctxT(t), signedIssue(tok, h)); answer(err) != "FailedPrecondition RECEIPT_ALREADY_USED" {
		t.Fatalf("second Issue on the signed receipt (other replica) = %v", err)
	}
}

// TestIssueRefusesASignedReceiptAdmissionDidNotMakeSo: a receipt signed by
// another key, altered after signing, expired, or of another tenant's
// principal gets no lease, each for its exact reason, and none of them
// uses up the receipt.
func TestIssueRefusesASignedReceiptAdmissionDidNotMakeSo(t *testing.T) {
	s := newSuite(t, 1)
	h := newHolder(t)
	other, err := (&keyring.Memory{}).Create(context.Background(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cur, _ := s.admKeys.ring.Current()
	r := aliceAllow()
	good := s.signed(t, r)
	parts := strings.Split(good, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	widened := strings.Replace(string(payload), `"gen":5`, `"gen":6`, 1)
	altered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(widened)) + "." + parts[2]
	impostor := keyring.Key{ID: cur.ID, Public: other.Public, Signer: other.Signer}
	globex := aliceAllow()
	globex.TenantId = "globex"

	for _, c := range []struct {
		name, tok, caller, want string
	}{
		{"signed by another key", sign(t, other, r, time.Now().Add(20*time.Second)), "", "PermissionDenied RECEIPT_INVALID"},
		{"another key under admission's kid", sign(t, impostor, r, time.Now().Add(20*time.Second)), "", "PermissionDenied RECEIPT_INVALID"},
		{"altered generation", altered, "", "PermissionDenied RECEIPT_INVALID"},
		{"expired", sign(t, cur, aliceAllow(), time.Now().Add(-time.Second)), "", "FailedPrecondition DECISION_EXPIRED"},
		{"another tenant's receipt", s.signed(t, globex), "", "PermissionDenied OTHER_PRINCIPAL"},
		{"alice's receipt presented by a user of another tenant", good, s.auth.User(t, subject, "globex"), "PermissionDenied OTHER_PRINCIPAL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := s.alice(t)
			if c.caller != "" {
				cl = s.client(t, 0, c.caller)
			}
			if _, err := cl.Issue(ctxT(t), signedIssue(c.tok, h)); answer(err) != c.want {
				t.Fatalf("Issue = %v (%s), want %s", err, answer(err), c.want)
			}
		})
	}
	if _, err := s.alice(t).Issue(ctxT(t), signedIssue(good, h)); err != nil {
		t.Fatalf("the receipt after the refusals: %v", err)
	}
}

// TestIssueRefusesAMalformedSignedReceiptRequest: a megabyte signed
// receipt and one sent beside a receipt_id are INVALID_ARGUMENT naming the
// field; the error does not echo the receipt.
func TestIssueRefusesAMalformedSignedReceiptRequest(t *testing.T) {
	s := newSuite(t, 1)
	h := newHolder(t)
	huge := strings.Repeat("x", 1<<20)
	_, err := s.alice(t).Issue(ctxT(t), signedIssue(huge, h))
	if code, _ := errorReason(err); code != codes.InvalidArgument || strings.Join(fieldViolations(err), ",") != "signed_receipt" {
		t.Fatalf("a megabyte signed receipt = %v", err)
	}
	if strings.Contains(err.Error(), "xxxxxxxx") {
		t.Fatal("the error echoes the signed receipt")
	}
	both := signedIssue(s.signed(t, aliceAllow()), h)
	both.ReceiptId = "rcpt-1"
	if _, err := s.alice(t).Issue(ctxT(t), both); strings.Join(fieldViolations(err), ",") != "signed_receipt" {
		t.Fatalf("signed_receipt beside receipt_id = %v", err)
	}
}

// TestIssueFetchesAdmissionKeysAgainAfterARotation: a receipt signed with
// a key admission made after the lease service fetched its keys verifies
// (one more fetch); receipts naming unknown keys do not make it fetch more
// than once a second; with admission's keys unreachable, a receipt under
// a new key is UNAVAILABLE ADMISSION_UNAVAILABLE, never a lease.
func TestIssueFetchesAdmissionKeysAgainAfterARotation(t *testing.T) {
	s := newSuite(t, 1)
	h := newHolder(t)
	if _, err := s.alice(t).Issue(ctxT(t), signedIssue(s.signed(t, aliceAllow()), h)); err != nil {
		t.Fatal(err)
	}
	before := s.admKeys.count()
	time.Sleep(1100 * time.Millisecond) // past the refresh gap
	if _, err := s.admKeys.ring.Rotate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.alice(t).Issue(ctxT(t), signedIssue(s.signed(t, aliceAllow()), h)); err != nil {
		t.Fatalf("Issue on a receipt signed after admission rotated: %v", err)
	}
	if got := s.admKeys.count(); got != before+1 {
		t.Fatalf("%d fetches for one rotation", got-before)
	}
	other, _ := (&keyring.Memory{}).Create(context.Background(), time.Now())
	for range 5 {
		if _, err := s.alice(t).Issue(ctxT(t), signedIssue(sign(t, other, aliceAllow(), time.Now().Add(20*time.Second)), h)); answer(err) != "PermissionDenied RECEIPT_INVALID" {
			t.Fatalf("unknown key = %v", err)
		}
	}
	if got := s.admKeys.count(); got > before+2 {
		t.Fatalf("five receipts under unknown keys made %d fetches", got-before-1)
	}
	time.Sleep(1100 * time.Millisecond)
	s.admKeys.setDown(true)
	if _, err := s.admKeys.ring.Rotate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.alice(t).Issue(ctxT(t), signedIssue(s.signed(t, aliceAllow()), h)); answer(err) != "Unavailable ADMISSION_UNAVAILABLE" {
		t.Fatalf("new key with admission's keys unreachable = %v", err)
	}
}

package lease_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"

	"github.com/toolcrib/toolcrib/revision/lease"
	"github.com/toolcrib/toolcrib/services/lease/admissionview"
	"github.com/toolcrib/toolcrib/services/lease/internal/keys"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
)

// executionReceipts counts the execution receipts in the database.
func (s *suite) executionReceipts(t *testing.T) int {
	t.Helper()
	conn, err := pgx.Connect(ctxT(t), s.pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(ctxT(t), `SELECT count(*) FROM lease.execution_receipts`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestIssueThenVerifyOnce(t *testing.T) {
	s := newSuite(t, 1)
	h := newHolder(t)
	before := time.Now().Truncate(time.Second)
	resp := s.issue(t, h)
	c := resp.GetClaims()
	if c.GetSubject() != subject || c.GetTenantId() != tenant || c.GetToolId() != toolID || c.GetServerId() != server ||
		c.GetAudienceClass() != class || c.GetGeneration() != 5 || c.GetPolicyEpoch() != 3 ||
		c.GetArgumentDigest() != argDigest || c.GetAudience() != audience {
		t.Fatalf("claims %v", c)
	}
	hk, _ := lease.ParseHolderKey(h.jwk)
	if c.GetHolderThumbprint() != hk.Thumbprint {
		t.Fatal("cnf.jkt is not the holder key's thumbprint")
	}
	life := c.GetExpiresAt().AsTime().Sub(c.GetIssuedAt().AsTime())
	if life <= 18*time.Second || life > 20*time.Second || c.GetIssuedAt().AsTime().Before(before) {
		t.Fatalf("lifetime %s: the lease lives until the decision's valid_until (20 s), not the default 30 s", life)
	}
	// The execution receipt was committed before the token came back.
	if n := s.executionReceipts(t); n != 1 || resp.GetExecutionReceiptId() != resp.GetClaims().GetLeaseId() {
		t.Fatalf("%d execution receipts, id %q; want the lease id %q", n, resp.GetExecutionReceiptId(), resp.GetClaims().GetLeaseId())
	}

	alice := s.alice(t)
	v, err := alice.Verify(ctxT(t), verifyReq(resp.GetToken(), proofFor(t, h, c)))
	if err != nil || !v.GetValid() || v.GetFailure() != leasev1.VerifyFailure_VERIFY_FAILURE_UNSPECIFIED {
		t.Fatalf("Verify = %v, %v", v, err)
	}
	if v.GetClaims().GetLeaseId() != c.GetLeaseId() {
		t.Fatal("Verify returned other claims")
	}
	if got := s.fresh.seen[len(s.fresh.seen)-1]; got.Generation != 5 || got.PolicyEpoch != 3 || got.Server != server ||
		got.AudienceClass != class || got.Tool != toolID {
		t.Fatalf("freshness asked about %+v", got)
	}
	// The same lease a second time, with a fresh proof, is refused.
	v, err = alice.Verify(ctxT(t), verifyReq(resp.GetToken(), proofFor(t, h, c)))
	if err != nil || v.GetValid() || v.GetFailure() != leasev1.VerifyFailure_VERIFY_FAILURE_ALREADY_USED {
		t.Fatalf("second Verify = %v, %v", v, err)
	}
}

func TestIssueRefuses(t *testing.T) {
	s := newSuite(t, 1)
	h := newHolder(t)
	alice := s.alice(t)
	s.allow("ok")
	deny := func(id string) {
		s.allow(id)
		s.receipts.m[id].Receipt.Decision = admissionv1.Decision_DECISION_DENY
	}
	deny("deny")
	s.allow("expired")
	d := s.receipts.m["expired"]
	d.ValidUntil = time.Now().Add(-time.Second)
	s.receipts.m["expired"] = d
	mallory := s.client(t, 0, s.auth.User(t, "mallory", tenant))
	otherTenant := s.client(t, 0, s.auth.User(t, subject, "beta"))
	// The holder's own public JWK with a private part added.
	privateJWK := append(h.jwk[:len(h.jwk)-1:len(h.jwk)-1], []byte(`,"d":"nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"}`)...)
	req := func(edit func(r *leasev1.IssueRequest)) *leasev1.IssueRequest {
		r := &leasev1.IssueRequest{ReceiptId: "ok", ArgumentDigest: argDigest, HolderPublicKey: h.jwk, Audience: audience}
		edit(r)
		return r
	}
	cases := []struct {
		name   string
		client leasev1.LeaseServiceClient
		req    *leasev1.IssueRequest
		code   codes.Code
		reason string
		field  string
	}{
		{"a DENY", alice, req(func(r *leasev1.IssueRequest) { r.ReceiptId = "deny" }), codes.PermissionDenied, "DECISION_NOT_ALLOW", ""},
		{"another principal's receipt", mallory, req(func(*leasev1.IssueRequest) {}), codes.PermissionDenied, "OTHER_PRINCIPAL", ""},
		{"another tenant's receipt", otherTenant, req(func(*leasev1.IssueRequest) {}), codes.PermissionDenied, "OTHER_PRINCIPAL", ""},
		{"an expired decision", alice, req(func(r *leasev1.IssueRequest) { r.ReceiptId = "expired" }), codes.FailedPrecondition, "DECISION_EXPIRED", ""},
		{"other arguments", alice, req(func(r *leasev1.IssueRequest) { r.ArgumentDigest = "sha256:" + strings.Repeat("e", 64) }),
			codes.FailedPrecondition, "ARGUMENTS_MISMATCH", ""},
		{"an unknown receipt", alice, req(func(r *leasev1.IssueRequest) { r.ReceiptId = "nope" }), codes.NotFound, "RECEIPT_NOT_FOUND", ""},
		{"a private holder key", alice, req(func(r *leasev1.IssueRequest) { r.HolderPublicKey = privateJWK }), codes.InvalidArgument, "INVALID_ARGUMENT", "holder_public_key"},
		{"an EC holder key", alice, req(func(r *leasev1.IssueRequest) {
			r.HolderPublicKey = []byte(`{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}`)
		}), codes.InvalidArgument, "INVALID_ARGUMENT", "holder_public_key"},
		{"a megabyte holder key", alice, req(func(r *leasev1.IssueRequest) { r.HolderPublicKey = make([]byte, 1<<20) }), codes.InvalidArgument, "INVALID_ARGUMENT", "holder_public_key"},
		{"no audience", alice, req(func(r *leasev1.IssueRequest) { r.Audience = "" }), codes.InvalidArgument, "INVALID_ARGUMENT", "audience"},
		{"a megabyte receipt id", alice, req(func(r *leasev1.IssueRequest) { r.ReceiptId = strings.Repeat("r", 1<<20) }), codes.InvalidArgument, "INVALID_ARGUMENT", "receipt_id"},
		{"both receipt and check", alice, req(func(r *leasev1.IssueRequest) { r.Check = &admissionv1.CheckRequest{ToolId: toolID} }), codes.InvalidArgument, "INVALID_ARGUMENT", "check"},
		{"an inline check without admission", alice, req(func(r *leasev1.IssueRequest) { r.ReceiptId = ""; r.Check = &admissionv1.CheckRequest{ToolId: toolID} }),
			codes.FailedPrecondition, "ADMISSION_UNAVAILABLE", ""},
		{"no credential", s.client(t, 0, ""), req(func(*leasev1.IssueRequest) {}), codes.Unauthenticated, "UNAUTHENTICATED", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.client.Issue(ctxT(t), tc.req)
			code, reason := errorReason(err)
			if code != tc.code || reason != tc.reason {
				t.Fatalf("Issue = %v; want %s %s", err, tc.code, tc.reason)
			}
			if tc.field != "" && !slices.Contains(fieldViolations(err), tc.field) {
				t.Fatalf("violations %v do not name %s", fieldViolations(err), tc.field)
			}
			if len(err.Error()) > 1000 {
				t.Fatalf("the error echoes the input: %d bytes", len(err.Error()))
			}
		})
	}
	if n := s.executionReceipts(t); n != 0 {
		t.Fatalf("%d execution receipts after refusals only", n)
	}
	// A frozen server gets no lease, and no receipt.
	if _, err := s.admin(t).FreezeIssuance(ctxT(t), &leasev1.FreezeIssuanceRequest{ServerId: server, Frozen: true, Reason: "rollback"}); err != nil {
		t.Fatal(err)
	}
	_, err := alice.Issue(ctxT(t), req(func(*leasev1.IssueRequest) {}))
	if code, reason := errorReason(err); code != codes.FailedPrecondition || reason != "ISSUANCE_FROZEN" {
		t.Fatalf("Issue on a frozen server = %v", err)
	}
	if n := s.executionReceipts(t); n != 0 {
		t.Fatalf("%d execution receipts for a frozen server", n)
	}
	if _, err := s.admin(t).FreezeIssuance(ctxT(t), &leasev1.FreezeIssuanceRequest{ServerId: server, Frozen: false}); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Issue(ctxT(t), req(func(*leasev1.IssueRequest) {})); err != nil {
		t.Fatalf("Issue after resume: %v", err)
	}
}

// ringKey reads the suite's current signing key from its key file, to sign
// leases the service itself would not (expired, by another key).
func (s *suite) ringKey(t *testing.T) lease.SigningKey {
	t.Helper()
	ks, err := keys.NewFile(s.cfg.KeyFile).Keys(ctxT(t))
	if err != nil || len(ks) == 0 {
		t.Fatalf("key file: %v", err)
	}
	return lease.SigningKey{ID: ks[0].ID, Signer: ks[0].Signer}
}

func TestVerifyRefusesOneFailurePerCause(t *testing.T) {
	s := newSuite(t, 1)
	h := newHolder(t)
	other := newHolder(t)
	_, foreign, _ := ed25519.GenerateKey(rand.Reader)
	key := s.ringKey(t)
	alice := s.alice(t)
	hk, _ := lease.ParseHolderKey(h.jwk)
	signed := func(t *testing.T, edit func(c *lease.Claims), k lease.SigningKey) (string, *leasev1.LeaseClaims) {
		now := time.Now().Truncate(time.Second)
		c := lease.Claims{ID: "forged-" + randomID(), Subject: subject, Tenant: tenant, Tool: toolID, Server: server,
			DescriptorDigest: "sha256:" + strings.Repeat("d", 64), Generation: 5, PolicyEpoch: 3, ArgumentDigest: argDigest,
			Audience: audience, HolderThumbprint: hk.Thumbprint, IssuedAt: now, ExpiresAt: now.Add(30 * time.Second)}
		edit(&c)
		tok, err := lease.Sign(k, c)
		if err != nil {
			t.Fatal(err)
		}
		return tok, &leasev1.LeaseClaims{LeaseId: c.ID, ArgumentDigest: c.ArgumentDigest, Audience: c.Audience}
	}
	type call struct {
		req  *leasev1.VerifyRequest
		want leasev1.VerifyFailure
	}
	// A slice, not a map: the tool revocation refuses every later lease of
	// the tool issued within its second, so it runs last.
	cases := []struct {
		name string
		mk   func(t *testing.T) call
	}{
		{"a forged token", func(t *testing.T) call {
			r := s.issue(t, h)
			parts := strings.Split(r.GetToken(), ".")
			sig := []byte(parts[2])
			sig[5] ^= 2
			return call{verifyReq(parts[0]+"."+parts[1]+"."+string(sig), proofFor(t, h, r.GetClaims())), leasev1.VerifyFailure_VERIFY_FAILURE_BAD_SIGNATURE}
		}},
		{"another key's signature under our kid", func(t *testing.T) call {
			tok, c := signed(t, func(*lease.Claims) {}, lease.SigningKey{ID: key.ID, Signer: foreign})
			return call{verifyReq(tok, proofFor(t, h, c)), leasev1.VerifyFailure_VERIFY_FAILURE_BAD_SIGNATURE}
		}},
		{"a key the service never published", func(t *testing.T) call {
			tok, c := signed(t, func(*lease.Claims) {}, lease.SigningKey{ID: "attacker", Signer: foreign})
			return call{verifyReq(tok, proofFor(t, h, c)), leasev1.VerifyFailure_VERIFY_FAILURE_UNKNOWN_KEY}
		}},
		{"an expired lease", func(t *testing.T) call {
			tok, c := signed(t, func(c *lease.Claims) {
				c.IssuedAt, c.ExpiresAt = c.IssuedAt.Add(-time.Minute), c.IssuedAt.Add(-10*time.Second)
			}, key)
			return call{verifyReq(tok, proofFor(t, h, c)), leasev1.VerifyFailure_VERIFY_FAILURE_EXPIRED}
		}},
		{"another audience", func(t *testing.T) call {
			r := s.issue(t, h)
			req := verifyReq(r.GetToken(), proofFor(t, h, r.GetClaims()))
			req.Audience = "executor.billing"
			return call{req, leasev1.VerifyFailure_VERIFY_FAILURE_WRONG_AUDIENCE}
		}},
		{"another tool", func(t *testing.T) call {
			r := s.issue(t, h)
			req := verifyReq(r.GetToken(), proofFor(t, h, r.GetClaims()))
			req.ToolId = "inventory.delete_all"
			return call{req, leasev1.VerifyFailure_VERIFY_FAILURE_OTHER_TOOL}
		}},
		{"other arguments", func(t *testing.T) call {
			r := s.issue(t, h)
			req := verifyReq(r.GetToken(), proofFor(t, h, r.GetClaims()))
			req.ArgumentDigest = "sha256:" + strings.Repeat("f", 64)
			return call{req, leasev1.VerifyFailure_VERIFY_FAILURE_ARGUMENTS_MISMATCH}
		}},
		{"another holder's proof", func(t *testing.T) call {
			r := s.issue(t, h)
			return call{verifyReq(r.GetToken(), proofFor(t, other, r.GetClaims())), leasev1.VerifyFailure_VERIFY_FAILURE_PROOF_OTHER_HOLDER}
		}},
		{"a stale proof", func(t *testing.T) call {
			r := s.issue(t, h)
			p, _ := lease.NewProof(h.priv, claimsOf(r.GetClaims()), time.Now().Add(-time.Minute))
			return call{verifyReq(r.GetToken(), p), leasev1.VerifyFailure_VERIFY_FAILURE_PROOF_STALE}
		}},
		{"a proof made for another lease", func(t *testing.T) call {
			r1, r2 := s.issue(t, h), s.issue(t, h)
			return call{verifyReq(r2.GetToken(), proofFor(t, h, r1.GetClaims())), leasev1.VerifyFailure_VERIFY_FAILURE_PROOF_OTHER_LEASE}
		}},
		{"no proof", func(t *testing.T) call {
			r := s.issue(t, h)
			return call{verifyReq(r.GetToken(), ""), leasev1.VerifyFailure_VERIFY_FAILURE_BAD_PROOF}
		}},
		{"a revoked lease id", func(t *testing.T) call {
			r := s.issue(t, h)
			if _, err := s.admin(t).Revoke(ctxT(t), &leasev1.RevokeRequest{Target: &leasev1.RevokeRequest_LeaseId{LeaseId: r.GetClaims().GetLeaseId()}}); err != nil {
				t.Fatal(err)
			}
			return call{verifyReq(r.GetToken(), proofFor(t, h, r.GetClaims())), leasev1.VerifyFailure_VERIFY_FAILURE_REVOKED}
		}},
		{"a frozen server", func(t *testing.T) call {
			r := s.issue(t, h)
			if _, err := s.admin(t).FreezeIssuance(ctxT(t), &leasev1.FreezeIssuanceRequest{ServerId: server, Frozen: true}); err != nil {
				t.Fatal(err)
			}
			return call{verifyReq(r.GetToken(), proofFor(t, h, r.GetClaims())), leasev1.VerifyFailure_VERIFY_FAILURE_FROZEN}
		}},
		{"a generation rolled back", func(t *testing.T) call {
			r := s.issue(t, h)
			s.fresh.set(admissionview.StaleCatalog, nil)
			return call{verifyReq(r.GetToken(), proofFor(t, h, r.GetClaims())), leasev1.VerifyFailure_VERIFY_FAILURE_STALE_CATALOG}
		}},
		{"a policy epoch moved on", func(t *testing.T) call {
			r := s.issue(t, h)
			s.fresh.set(admissionview.PolicyChanged, nil)
			return call{verifyReq(r.GetToken(), proofFor(t, h, r.GetClaims())), leasev1.VerifyFailure_VERIFY_FAILURE_POLICY_CHANGED}
		}},
		{"a revoked tool", func(t *testing.T) call {
			r := s.issue(t, h)
			if _, err := s.admin(t).Revoke(ctxT(t), &leasev1.RevokeRequest{Target: &leasev1.RevokeRequest_ToolId{ToolId: toolID}, Reason: "incident"}); err != nil {
				t.Fatal(err)
			}
			return call{verifyReq(r.GetToken(), proofFor(t, h, r.GetClaims())), leasev1.VerifyFailure_VERIFY_FAILURE_REVOKED}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s.fresh.set(admissionview.Current, nil)
			c := tc.mk(t)
			v, err := alice.Verify(ctxT(t), c.req)
			if err != nil {
				t.Fatal(err)
			}
			if v.GetValid() || v.GetFailure() != c.want {
				t.Fatalf("Verify = %v %s (%s), want %s", v.GetValid(), v.GetFailure(), v.GetDetail(), c.want)
			}
			// Clean up state shared across cases.
			if _, err := s.admin(t).FreezeIssuance(ctxT(t), &leasev1.FreezeIssuanceRequest{ServerId: server, Frozen: false}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestRefusedVerifyDoesNotBurnTheLease(t *testing.T) {
	s := newSuite(t, 1)
	h, other := newHolder(t), newHolder(t)
	r := s.issue(t, h)
	alice := s.alice(t)
	v, err := alice.Verify(ctxT(t), verifyReq(r.GetToken(), proofFor(t, other, r.GetClaims())))
	if err != nil || v.GetFailure() != leasev1.VerifyFailure_VERIFY_FAILURE_PROOF_OTHER_HOLDER {
		t.Fatalf("thief's Verify = %v, %v", v, err)
	}
	v, err = alice.Verify(ctxT(t), verifyReq(r.GetToken(), proofFor(t, h, r.GetClaims())))
	if err != nil || !v.GetValid() {
		t.Fatalf("the holder's Verify after a thief's attempt = %v, %v", v, err)
	}
}

func TestVerifyFailsClosedWhenFreshnessIsNotProvable(t *testing.T) {
	s := newSuite(t, 1)
	h := newHolder(t)
	r := s.issue(t, h)
	s.fresh.set(admissionview.Current, admissionview.ErrStale)
	_, err := s.alice(t).Verify(ctxT(t), verifyReq(r.GetToken(), proofFor(t, h, r.GetClaims())))
	if code, reason := errorReason(err); code != codes.Unavailable || reason != "STALE_POLICY" {
		t.Fatalf("Verify with a stale follower = %v", err)
	}
	// Not consumed: once fresh again it verifies.
	s.fresh.set(admissionview.Current, nil)
	v, err := s.alice(t).Verify(ctxT(t), verifyReq(r.GetToken(), proofFor(t, h, r.GetClaims())))
	if err != nil || !v.GetValid() {
		t.Fatalf("Verify once fresh = %v, %v", v, err)
	}
}

// TestReplayAcrossTwoReplicasExactlyOneSucceeds: two lease replicas on one
// database, Redis and key file; the same lease presented to both
// concurrently, many times, is accepted exactly once.
func TestReplayAcrossTwoReplicasExactlyOneSucceeds(t *testing.T) {
	s := newSuite(t, 2)
	h := newHolder(t)
	token := s.auth.User(t, subject, tenant)
	clients := []leasev1.LeaseServiceClient{s.client(t, 0, token), s.client(t, 1, token)}
	for round := range 5 {
		r := s.issue(t, h)
		var valid, used atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				v, err := clients[i%2].Verify(ctxT(t), verifyReq(r.GetToken(), proofFor(t, h, r.GetClaims())))
				switch {
				case err != nil:
					t.Errorf("Verify: %v", err)
				case v.GetValid():
					valid.Add(1)
				case v.GetFailure() == leasev1.VerifyFailure_VERIFY_FAILURE_ALREADY_USED:
					used.Add(1)
				default:
					t.Errorf("Verify failed with %s", v.GetFailure())
				}
			}()
		}
		close(start)
		wg.Wait()
		if valid.Load() != 1 || used.Load() != 7 {
			t.Fatalf("round %d: %d accepted, %d ALREADY_USED; want 1 and 7", round, valid.Load(), used.Load())
		}
	}
}

func TestRevokeAndFreezeNeedAnAdminOrService(t *testing.T) {
	s := newSuite(t, 1)
	alice := s.alice(t)
	_, err := alice.Revoke(ctxT(t), &leasev1.RevokeRequest{Target: &leasev1.RevokeRequest_TenantId{TenantId: "beta"}})
	if code, _ := errorReason(err); code != codes.PermissionDenied {
		t.Fatalf("a user's Revoke = %v", err)
	}
	_, err = alice.FreezeIssuance(ctxT(t), &leasev1.FreezeIssuanceRequest{ServerId: server, Frozen: true})
	if code, _ := errorReason(err); code != codes.PermissionDenied {
		t.Fatalf("a user's FreezeIssuance = %v", err)
	}
	svc := s.client(t, 0, s.auth.Service(t))
	fr, err := svc.FreezeIssuance(ctxT(t), &leasev1.FreezeIssuanceRequest{ServerId: server, Frozen: true, Reason: "discovery rollback"})
	if err != nil || !fr.GetFrozen() || fr.GetChangedAt() == nil {
		t.Fatalf("a service's FreezeIssuance = %v, %v", fr, err)
	}
	for name, req := range map[string]*leasev1.RevokeRequest{
		"no target":         {},
		"a megabyte target": {Target: &leasev1.RevokeRequest_ToolId{ToolId: strings.Repeat("t", 1<<20)}},
		"a control char":    {Target: &leasev1.RevokeRequest_ServerId{ServerId: "inv\nentory"}},
		"a long reason":     {Target: &leasev1.RevokeRequest_ServerId{ServerId: server}, Reason: strings.Repeat("r", 2000)},
	} {
		if _, err := s.admin(t).Revoke(ctxT(t), req); func() bool { c, _ := errorReason(err); return c != codes.InvalidArgument }() {
			t.Errorf("%s: Revoke = %v, want InvalidArgument", name, err)
		}
	}
	at, err := s.admin(t).Revoke(ctxT(t), &leasev1.RevokeRequest{Target: &leasev1.RevokeRequest_ServerId{ServerId: server}})
	if err != nil || at.GetEffectiveAt().AsTime().After(time.Now().Add(time.Second)) {
		t.Fatalf("Revoke = %v, %v", at, err)
	}
}

func TestGetSigningKeysPublishesTheKeyLeasesAreSignedWith(t *testing.T) {
	s := newSuite(t, 1)
	h := newHolder(t)
	r := s.issue(t, h)
	// GetSigningKeys is public: no credential needed.
	keysResp, err := s.client(t, 0, "").GetSigningKeys(ctxT(t), &leasev1.GetSigningKeysRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ks, err := lease.ParseKeySet(keysResp.GetJwks())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ks.Key(keysResp.GetCurrentKeyId()); !ok {
		t.Fatal("the current key is not in the JWKS")
	}
	// An executor verifies the lease offline with the published keys.
	c, ref := lease.Check(lease.Input{Token: r.GetToken(), Proof: proofFor(t, h, r.GetClaims()), Audience: audience, Tool: toolID,
		ArgumentDigest: argDigest, Keys: ks, Now: time.Now()})
	if ref != nil || c.ID != r.GetClaims().GetLeaseId() {
		t.Fatalf("offline check = %v", ref)
	}
	if strings.Contains(string(keysResp.GetJwks()), `"d"`) {
		t.Fatal("the JWKS carries a private key")
	}
}

// TestFailuresMatchTheProto keeps revision/lease's Failure numbers and
// names in step with lease.proto's VerifyFailure.
func TestFailuresMatchTheProto(t *testing.T) {
	n := 0
	for _, f := range lease.Failures() {
		if got := leasev1.VerifyFailure(f).String(); got != "VERIFY_FAILURE_"+f.String() {
			t.Errorf("failure %d is %s in the proto, %s in revision/lease", f, got, f)
		}
		n++
	}
	if want := len(leasev1.VerifyFailure_name) - 1; n != want {
		t.Fatalf("revision/lease has %d failures, the proto %d", n, want)
	}
}

package lease_test

import (
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/redistest"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	service "github.com/toolcrib/toolcrib/services/lease"
	"github.com/toolcrib/toolcrib/services/lease/admissionview"

	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
)

// redeemAnswer is "OK valid", "OK <failure>" or the error's code and
// reason.
func redeemAnswer(resp *leasev1.RedeemResponse, err error) string {
	if err != nil {
		return answer(err)
	}
	if resp.GetValid() {
		return "OK valid"
	}
	return "OK " + resp.GetFailure().String()
}

func (s *suite) executor(t *testing.T, replica int) leasev1.LeaseServiceClient {
	return s.client(t, replica, s.auth.Service(t))
}

func redeem(t *testing.T, c leasev1.LeaseServiceClient, claims *leasev1.LeaseClaims) string {
	t.Helper()
	resp, err := c.Redeem(ctxT(t), &leasev1.RedeemRequest{Claims: claims})
	return redeemAnswer(resp, err)
}

// TestRedeemIsSingleUseAcrossReplicas: the first Redeem of a lease is
// valid; a second, on the other replica, is ALREADY_USED, and so is a
// Verify of it (one ledger for both).
func TestRedeemIsSingleUseAcrossReplicas(t *testing.T) {
	s := newSuite(t, 2)
	h := newHolder(t)
	resp := s.issue(t, h)
	if got := redeem(t, s.executor(t, 0), resp.GetClaims()); got != "OK valid" {
		t.Fatalf("first Redeem = %s", got)
	}
	if got := redeem(t, s.executor(t, 1), resp.GetClaims()); got != "OK VERIFY_FAILURE_ALREADY_USED" {
		t.Fatalf("second Redeem on the other replica = %s", got)
	}
	v, err := s.client(t, 0, s.auth.Service(t)).Verify(ctxT(t), verifyReq(resp.GetToken(), proofFor(t, h, resp.GetClaims())))
	if err != nil || v.GetFailure() != leasev1.VerifyFailure_VERIFY_FAILURE_ALREADY_USED {
		t.Fatalf("Verify of a redeemed lease = %v, %v", v.GetFailure(), err)
	}
}

// TestRedeemNeedsAServiceIdentity: a user (even the lease's own
// principal) and a platform admin may not redeem; nothing is consumed.
func TestRedeemNeedsAServiceIdentity(t *testing.T) {
	s := newSuite(t, 1)
	resp := s.issue(t, newHolder(t))
	for name, tok := range map[string]string{"the lease's own user": s.auth.User(t, subject, tenant), "an admin": s.auth.Admin(t)} {
		if got := redeem(t, s.client(t, 0, tok), resp.GetClaims()); got != "PermissionDenied PERMISSION_DENIED" {
			t.Fatalf("Redeem by %s = %q", name, got)
		}
	}
	if got := redeem(t, s.client(t, 0, ""), resp.GetClaims()); !strings.HasPrefix(got, "Unauthenticated ") {
		t.Fatalf("Redeem without a credential = %q", got)
	}
	if got := redeem(t, s.executor(t, 0), resp.GetClaims()); got != "OK valid" {
		t.Fatalf("Redeem by the executor after the refusals = %s", got)
	}
}

// TestRedeemIsBoundToTheExecutorsAudiences: with --redeem-audiences, a
// service may redeem only leases of the audiences paired with it: another
// toolcrib service presenting the claims is PERMISSION_DENIED and consumes
// nothing (the paired executor then redeems the lease once). A service
// that lies about a lease's audience: see
// [TestALieAboutTheAudienceCannotUseUpAnotherExecutorsLease].
func TestRedeemIsBoundToTheExecutorsAudiences(t *testing.T) {
	s := newSuiteWith(t, 1, func(c *service.Config) {
		c.RedeemAudiences = "test-service=" + audience + ", other-executor=executor.billing"
	})
	resp := s.issue(t, newHolder(t))
	other := s.client(t, 0, s.auth.Token(t, principal.Claims{Subject: "other-executor", Tenant: servicetest.PlatformTenant,
		Groups: []string{servicetest.ServiceGroup}}))
	if got := redeem(t, other, resp.GetClaims()); got != "PermissionDenied PERMISSION_DENIED" {
		t.Fatalf("Redeem by a service paired with another audience = %q", got)
	}
	if got := redeem(t, s.executor(t, 0), resp.GetClaims()); got != "OK valid" {
		t.Fatalf("Redeem by the paired executor after the refusal = %s", got)
	}
}

// TestALieAboutTheAudienceCannotUseUpAnotherExecutorsLease: a service
// paired with its own audience presents another executor's lease under
// that audience. Redeem cannot tell (it takes the claims as verified), but
// the single-use record is the lease id with its audience, so the lie uses
// up nothing of the lease: the executor it is addressed to redeems it once,
// and the lease's Verify and a second Redeem are ALREADY_USED.
func TestALieAboutTheAudienceCannotUseUpAnotherExecutorsLease(t *testing.T) {
	s := newSuiteWith(t, 1, func(c *service.Config) {
		c.RedeemAudiences = "test-service=" + audience + ", other-executor=executor.billing"
	})
	h := newHolder(t)
	resp := s.issue(t, h)
	other := s.client(t, 0, s.auth.Token(t, principal.Claims{Subject: "other-executor", Tenant: servicetest.PlatformTenant,
		Groups: []string{servicetest.ServiceGroup}}))
	lie := proto.Clone(resp.GetClaims()).(*leasev1.LeaseClaims)
	lie.Audience = "executor.billing"
	for i := range 2 {
		// What the liar is told does not matter to the lease; it is only
		// ever told about its own record.
		if got := redeem(t, other, lie); i == 1 && got != "OK VERIFY_FAILURE_ALREADY_USED" {
			t.Fatalf("the lie presented again = %s", got)
		}
	}
	if got := redeem(t, s.executor(t, 0), resp.GetClaims()); got != "OK valid" {
		t.Fatalf("Redeem by the lease's own executor after another service lied about its audience = %s", got)
	}
	if got := redeem(t, s.executor(t, 0), resp.GetClaims()); got != "OK VERIFY_FAILURE_ALREADY_USED" {
		t.Fatalf("a second Redeem = %s", got)
	}
	v, err := s.client(t, 0, s.auth.Service(t)).Verify(ctxT(t), verifyReq(resp.GetToken(), proofFor(t, h, resp.GetClaims())))
	if err != nil || v.GetFailure() != leasev1.VerifyFailure_VERIFY_FAILURE_ALREADY_USED {
		t.Fatalf("Verify of the redeemed lease = %v, %v", v.GetFailure(), err)
	}
}

// TestRedeemAudiencesFlag: pairs parse (an identity may have several);
// a malformed pair is a configuration error naming the flag.
func TestRedeemAudiencesFlag(t *testing.T) {
	got, err := service.ParseRedeemAudiences(" a=x, a=y ,b=z")
	if err != nil || !got["a"]["x"] || !got["a"]["y"] || !got["b"]["z"] || len(got) != 2 {
		t.Fatalf("%v %v", got, err)
	}
	if got, err := service.ParseRedeemAudiences(""); got != nil || err != nil {
		t.Fatalf("empty: %v %v", got, err)
	}
	for _, bad := range []string{"a", "=x", "a=", "a=x,,b=y"} {
		if _, err := service.ParseRedeemAudiences(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	cfg, err := service.ParseConfig([]string{"--key-file", "k", "--redis-url", "redis://127.0.0.1:6379", "--redeem-audiences", "nope"}, func(string) (string, bool) { return "", false })
	if err == nil || !strings.Contains(err.Error(), "redeem-audiences") {
		t.Fatalf("a malformed --redeem-audiences: %v (%+v)", err, cfg.RedeemAudiences)
	}
}

// TestRedeemRefusesRevokedFrozenStaleAndExpiredLeases: each refusal has
// its reason and leaves the lease unused (it redeems once the cause is
// gone, where it can go).
func TestRedeemRefusesRevokedFrozenStaleAndExpiredLeases(t *testing.T) {
	s := newSuite(t, 1)
	h := newHolder(t)
	admin, exec := s.admin(t), s.executor(t, 0)

	frozen := s.issue(t, h)
	if _, err := admin.FreezeIssuance(ctxT(t), &leasev1.FreezeIssuanceRequest{ServerId: server, Frozen: true}); err != nil {
		t.Fatal(err)
	}
	if got := redeem(t, exec, frozen.GetClaims()); got != "OK VERIFY_FAILURE_FROZEN" {
		t.Fatalf("Redeem on a frozen server = %s", got)
	}
	if _, err := admin.FreezeIssuance(ctxT(t), &leasev1.FreezeIssuanceRequest{ServerId: server, Frozen: false}); err != nil {
		t.Fatal(err)
	}
	if got := redeem(t, exec, frozen.GetClaims()); got != "OK valid" {
		t.Fatalf("Redeem after the resume = %s", got)
	}

	s.fresh.set(admissionview.PolicyChanged, nil)
	moved := s.issueAnyway(t, h)
	if got := redeem(t, exec, moved.GetClaims()); got != "OK VERIFY_FAILURE_POLICY_CHANGED" {
		t.Fatalf("Redeem after the tenant's policy moved = %s", got)
	}
	s.fresh.set(admissionview.Current, admissionview.ErrStale)
	if got := redeem(t, exec, moved.GetClaims()); got != "Unavailable STALE_POLICY" {
		t.Fatalf("Redeem with freshness unprovable = %s", got)
	}
	s.fresh.set(admissionview.Current, nil)

	expired := proto.Clone(moved.GetClaims()).(*leasev1.LeaseClaims)
	expired.IssuedAt = timestamppb.New(time.Now().Add(-2 * time.Minute))
	expired.ExpiresAt = timestamppb.New(time.Now().Add(-time.Minute))
	if got := redeem(t, exec, expired); got != "OK VERIFY_FAILURE_EXPIRED" {
		t.Fatalf("Redeem of expired claims = %s", got)
	}
	forever := proto.Clone(moved.GetClaims()).(*leasev1.LeaseClaims)
	forever.ExpiresAt = timestamppb.New(time.Now().Add(time.Hour))
	if got := redeem(t, exec, forever); got != "InvalidArgument INVALID_ARGUMENT" {
		t.Fatalf("Redeem of claims living an hour = %s", got)
	}

	revoked := s.issue(t, h)
	if _, err := admin.Revoke(ctxT(t), &leasev1.RevokeRequest{Target: &leasev1.RevokeRequest_TenantId{TenantId: tenant}}); err != nil {
		t.Fatal(err)
	}
	if got := redeem(t, exec, revoked.GetClaims()); got != "OK VERIFY_FAILURE_REVOKED" {
		t.Fatalf("Redeem after the tenant's leases were revoked = %s", got)
	}
}

// issueAnyway issues a lease with the freshness fake answering Current for
// the Issue only (Issue re-checks freshness too), then restores its
// verdict.
func (s *suite) issueAnyway(t *testing.T, h holder) *leasev1.IssueResponse {
	t.Helper()
	s.fresh.mu.Lock()
	v, err := s.fresh.verdict, s.fresh.err
	s.fresh.mu.Unlock()
	s.fresh.set(admissionview.Current, nil)
	resp := s.issue(t, h)
	s.fresh.set(v, err)
	return resp
}

// TestRedeemFailsClosedWithoutRedis: with the lease service's Redis gone,
// Redeem is UNAVAILABLE LEDGER_UNAVAILABLE, never valid.
func TestRedeemFailsClosedWithoutRedis(t *testing.T) {
	port := redistest.FreePort(t)
	rs := redistest.StartServer(t, port, false, "port "+strconv.Itoa(port))
	s := newSuiteWith(t, 1, func(c *service.Config) { c.RedisURL = "redis://" + rs.Addr() })
	resp := s.issue(t, newHolder(t))
	rs.Kill()
	if got := redeem(t, s.executor(t, 0), resp.GetClaims()); got != "Unavailable LEDGER_UNAVAILABLE" {
		t.Fatalf("Redeem without Redis = %s", got)
	}
}

// TestRedeemRefusesIncompleteClaims: claims missing what the checks read
// are INVALID_ARGUMENT naming the fields.
func TestRedeemRefusesIncompleteClaims(t *testing.T) {
	s := newSuite(t, 1)
	_, err := s.executor(t, 0).Redeem(ctxT(t), &leasev1.RedeemRequest{Claims: &leasev1.LeaseClaims{LeaseId: "l"}})
	want := []string{"claims.descriptor_digest", "claims.expires_at", "claims.generation", "claims.server_id", "claims.subject", "claims.tool_id"}
	got := fieldViolations(err)
	sort.Strings(got)
	if !equalStrings(got, want) {
		t.Fatalf("violations %v, want %v", got, want)
	}
	if _, err := s.executor(t, 0).Redeem(ctxT(t), &leasev1.RedeemRequest{}); len(fieldViolations(err)) != 1 {
		t.Fatalf("no claims = %v", err)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestRedeemRefusesAMegabyteOfClaims: a megabyte lease id or subject is
// INVALID_ARGUMENT naming the field, its value never echoed, and nothing is
// consumed (the real lease still redeems once).
func TestRedeemRefusesAMegabyteOfClaims(t *testing.T) {
	s := newSuite(t, 1)
	resp := s.issue(t, newHolder(t))
	big := strings.Repeat("x", 1<<20)
	for field, edit := range map[string]func(c *leasev1.LeaseClaims){
		"claims.lease_id": func(c *leasev1.LeaseClaims) { c.LeaseId = big },
		"claims.subject":  func(c *leasev1.LeaseClaims) { c.Subject = big },
	} {
		c := proto.Clone(resp.GetClaims()).(*leasev1.LeaseClaims)
		edit(c)
		_, err := s.executor(t, 0).Redeem(ctxT(t), &leasev1.RedeemRequest{Claims: c})
		if got := fieldViolations(err); !slices.Contains(got, field) || len(err.Error()) > 4096 {
			t.Fatalf("a megabyte %s: violations %v, error of %d bytes", field, got, len(err.Error()))
		}
	}
	if got := redeem(t, s.executor(t, 0), resp.GetClaims()); got != "OK valid" {
		t.Fatalf("the real lease after the refusals = %s", got)
	}
}

package issuance

import (
	"strings"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/services/lease/admissionview"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
)

var (
	now   = time.Date(2026, 12, 1, 10, 0, 0, 300_000_000, time.UTC)
	alice = Principal{Subject: "alice", Tenant: "acme"}
	arg   = "sha256:" + strings.Repeat("a", 64)
)

func allow() admissionview.Decision {
	return admissionview.Decision{
		Receipt: &admissionv1.Receipt{
			ReceiptId: "r1", Decision: admissionv1.Decision_DECISION_ALLOW, Reason: catalogv1.DecisionReason_DECISION_REASON_ALLOW,
			TenantId: "acme", Subject: "alice", ToolId: "inv.reserve", ServerId: "inv", AudienceClass: "acme.readers",
			Generation: 4, DescriptorDigest: "sha256:" + strings.Repeat("d", 64), PolicyEpoch: 2, ArgumentDigest: arg,
		},
		ValidUntil: now.Add(5 * time.Second),
	}
}

func TestDecideRefusesOneReasonPerCause(t *testing.T) {
	cases := []struct {
		name string
		edit func(d *admissionview.Decision, p *Principal, arg *string)
		want string
	}{
		{"no receipt", func(d *admissionview.Decision, _ *Principal, _ *string) { d.Receipt = nil }, ReasonReceiptIncomplete},
		{"another subject", func(_ *admissionview.Decision, p *Principal, _ *string) { p.Subject = "mallory" }, ReasonOtherPrincipal},
		{"another tenant", func(_ *admissionview.Decision, p *Principal, _ *string) { p.Tenant = "other" }, ReasonOtherPrincipal},
		{"a DENY", func(d *admissionview.Decision, _ *Principal, _ *string) {
			d.Receipt.Decision = admissionv1.Decision_DECISION_DENY
			d.Receipt.Reason = catalogv1.DecisionReason_DECISION_REASON_FORBIDDEN
		}, ReasonNotAllow},
		{"an ALLOW without a generation", func(d *admissionview.Decision, _ *Principal, _ *string) { d.Receipt.Generation = 0 }, ReasonReceiptIncomplete},
		{"an ALLOW without a receipt id", func(d *admissionview.Decision, _ *Principal, _ *string) { d.Receipt.ReceiptId = "" }, ReasonReceiptIncomplete},
		{"expired", func(d *admissionview.Decision, _ *Principal, _ *string) { d.ValidUntil = now }, ReasonExpired},
		{"under a second left", func(d *admissionview.Decision, _ *Principal, _ *string) {
			d.ValidUntil = now.Add(600 * time.Millisecond)
		}, ReasonExpired},
		{"other arguments", func(_ *admissionview.Decision, _ *Principal, a *string) { *a = "sha256:" + strings.Repeat("b", 64) }, ReasonArgumentsMismatch},
		{"user-confirmed, no confirmer", func(d *admissionview.Decision, _ *Principal, _ *string) {
			d.Receipt.Mode = admissionv1.Mode_MODE_USER_CONFIRMED
		}, ReasonUnconfirmed},
		{"another principal's unconfirmed", func(d *admissionview.Decision, p *Principal, _ *string) {
			p.Subject = "mallory"
			d.Receipt.Mode = admissionv1.Mode_MODE_USER_CONFIRMED
		}, ReasonOtherPrincipal},
		{"expired unconfirmed", func(d *admissionview.Decision, _ *Principal, _ *string) {
			d.Receipt.Mode = admissionv1.Mode_MODE_USER_CONFIRMED
			d.ValidUntil = now
		}, ReasonUnconfirmed},
		// Adjacent pairs: the earlier cause wins.
		{"another principal's DENY", func(d *admissionview.Decision, p *Principal, _ *string) {
			p.Subject = "mallory"
			d.Receipt.Decision = admissionv1.Decision_DECISION_DENY
		}, ReasonOtherPrincipal},
		{"an expired DENY", func(d *admissionview.Decision, _ *Principal, _ *string) {
			d.Receipt.Decision = admissionv1.Decision_DECISION_DENY
			d.ValidUntil = now.Add(-time.Hour)
		}, ReasonNotAllow},
		{"expired with other arguments", func(d *admissionview.Decision, _ *Principal, a *string) { d.ValidUntil = now; *a = "x" }, ReasonExpired},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, p, a := allow(), alice, arg
			tc.edit(&d, &p, &a)
			_, r := Decide(now, p, d, a, 0)
			if r == nil || r.Reason != tc.want {
				t.Fatalf("Decide = %v, want %s", r, tc.want)
			}
		})
	}
}

// A user-confirmed ALLOW that names its confirmer gets a lease.
func TestDecideIssuesAConfirmedDecision(t *testing.T) {
	d := allow()
	d.Receipt.Mode, d.Receipt.Confirmer = admissionv1.Mode_MODE_USER_CONFIRMED, "gateway"
	if _, r := Decide(now, alice, d, arg, 0); r != nil {
		t.Fatalf("confirmed decision refused: %v", r)
	}
}

func TestDecideLifetime(t *testing.T) {
	iat := now.Truncate(time.Second)
	cases := []struct {
		name       string
		ttl        time.Duration
		validUntil time.Duration // after now
		want       time.Duration // exp - iat
	}{
		{"default", 0, time.Hour, DefaultTTL},
		{"requested", 10 * time.Second, time.Hour, 10 * time.Second},
		{"capped at 60s", 10 * time.Minute, time.Hour, 60 * time.Second},
		{"never past valid_until", 60 * time.Second, 5 * time.Second, 5 * time.Second},
		{"valid_until truncated down", 60 * time.Second, 5*time.Second + 900*time.Millisecond, 6 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := allow()
			d.ValidUntil = now.Add(tc.validUntil)
			w, r := Decide(now, alice, d, arg, tc.ttl)
			if r != nil {
				t.Fatal(r)
			}
			if !w.IssuedAt.Equal(iat) || w.ExpiresAt.Sub(w.IssuedAt) != tc.want {
				t.Fatalf("window %s..%s, want %s long from %s", w.IssuedAt, w.ExpiresAt, tc.want, iat)
			}
			if w.ExpiresAt.After(d.ValidUntil) {
				t.Fatal("the lease outlives the decision")
			}
		})
	}
}

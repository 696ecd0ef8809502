package issuance

import (
	"time"

	"github.com/toolcrib/toolcrib/revision/lease"
	"github.com/toolcrib/toolcrib/services/lease/admissionview"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
)

// Reasons of a [Refusal] (ErrorInfo reasons at the API).
const (
	// ReasonReceiptIncomplete: the receipt lacks what a lease binds.
	ReasonReceiptIncomplete = "RECEIPT_INCOMPLETE"
	// ReasonOtherPrincipal: the decision belongs to another principal.
	ReasonOtherPrincipal = "OTHER_PRINCIPAL"
	// ReasonNotAllow: the decision is not ALLOW.
	ReasonNotAllow = "DECISION_NOT_ALLOW"
	// ReasonExpired: the decision may no longer be relied on.
	ReasonExpired = "DECISION_EXPIRED"
	// ReasonArgumentsMismatch: the argument digest is not the decision's.
	ReasonArgumentsMismatch = "ARGUMENTS_MISMATCH"
	// ReasonUnconfirmed: a MODE_USER_CONFIRMED ALLOW whose receipt names
	// no confirmer (only a confirmer may assert a confirmation; admission
	// denies such a Check, so this is a receipt it did not make that way).
	ReasonUnconfirmed = "CONFIRMER_MISSING"
)

// DefaultTTL is a lease's lifetime when the request names none.
const DefaultTTL = 30 * time.Second

// Refusal says why no lease is issued.
type Refusal struct {
	// Reason is one of the Reason constants.
	Reason string
	// Message is for the caller.
	Message string
}

func (r *Refusal) Error() string { return r.Reason + ": " + r.Message }

// Permission reports whether the refusal is about who asks (PERMISSION_DENIED)
// rather than the state of the decision (FAILED_PRECONDITION).
func (r *Refusal) Permission() bool {
	return r.Reason == ReasonOtherPrincipal || r.Reason == ReasonNotAllow || r.Reason == ReasonUnconfirmed
}

// Principal is the verified caller of Issue.
type Principal struct {
	Subject string
	Tenant  string
}

// Window is the life of the lease to issue, whole seconds.
type Window struct {
	IssuedAt, ExpiresAt time.Time
}

// Decide applies the rules to a decision d cited by principal p for
// arguments with argumentDigest and a requested lifetime ttl (0 for
// [DefaultTTL], capped at [lease.MaxTTL]). When several causes hold, the
// first is the answer:
//
//  1. [ReasonReceiptIncomplete]: no receipt, or an ALLOW without receipt
//     id (the key its single use is claimed under), server, tool,
//     generation or descriptor digest;
//  2. [ReasonOtherPrincipal]: subject or tenant differ from p's — checked
//     before the decision itself, so another principal's receipt reveals
//     nothing;
//  3. [ReasonNotAllow]: the decision is not ALLOW;
//     [ReasonUnconfirmed]: an ALLOW in MODE_USER_CONFIRMED whose receipt
//     names no confirmer;
//  4. [ReasonExpired]: now is at or past valid_until, or less than a whole
//     second of it is left;
//  5. [ReasonArgumentsMismatch]: argumentDigest is not the receipt's.
//
// The lease is issued at now (truncated to the second) and expires after
// ttl or at valid_until (truncated), whichever is first.
func Decide(now time.Time, p Principal, d admissionview.Decision, argumentDigest string, ttl time.Duration) (Window, *Refusal) {
	r := d.Receipt
	if r == nil {
		return Window{}, &Refusal{ReasonReceiptIncomplete, "the decision carries no receipt"}
	}
	if r.GetSubject() != p.Subject || r.GetTenantId() != p.Tenant {
		return Window{}, &Refusal{ReasonOtherPrincipal, "the decision belongs to another principal"}
	}
	if r.GetDecision() != admissionv1.Decision_DECISION_ALLOW {
		return Window{}, &Refusal{ReasonNotAllow, "the decision is not ALLOW (reason " + r.GetReason().String() + ")"}
	}
	if r.GetMode() == admissionv1.Mode_MODE_USER_CONFIRMED && r.GetConfirmer() == "" {
		return Window{}, &Refusal{ReasonUnconfirmed, "the decision is user-confirmed but names no confirmer; only a confirmer may assert a confirmation"}
	}
	if r.GetReceiptId() == "" || r.GetServerId() == "" || r.GetToolId() == "" || r.GetGeneration() < 1 || r.GetDescriptorDigest() == "" {
		return Window{}, &Refusal{ReasonReceiptIncomplete, "the receipt lacks its id, server, tool, generation or descriptor digest"}
	}
	iat := now.Truncate(time.Second)
	until := d.ValidUntil.Truncate(time.Second)
	if !now.Before(d.ValidUntil) || !until.After(iat) {
		return Window{}, &Refusal{ReasonExpired, "the decision may no longer be relied on; run Check again"}
	}
	if argumentDigest != r.GetArgumentDigest() {
		return Window{}, &Refusal{ReasonArgumentsMismatch, "the argument digest is not the one the decision was made for"}
	}
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	ttl = min(ttl, lease.MaxTTL)
	exp := iat.Add(ttl)
	if until.Before(exp) {
		exp = until
	}
	return Window{IssuedAt: iat, ExpiresAt: exp}, nil
}

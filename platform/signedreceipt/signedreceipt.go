package signedreceipt

import (
	"crypto"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	"github.com/toolcrib/toolcrib/platform/keyring"
)

const (
	// TokenType is the `typ` header of a signed receipt.
	TokenType = "receipt+jwt"
	// MaxTokenBytes bounds a signed receipt; a longer one is refused unread.
	MaxTokenBytes = 8 << 10
)

// Errors of [Parse]; each wraps [ErrInvalid].
var (
	// ErrInvalid is wrapped by every refusal of a signed receipt.
	ErrInvalid = errors.New("signed receipt: invalid")
	// ErrUnknownKey: the receipt names a key (`kid`) the key set does not
	// hold: signed by another key, or by one admission does not publish
	// (yet, to this key set: fetch the keys again once).
	ErrUnknownKey = fmt.Errorf("%w: signed with a key admission does not publish", ErrInvalid)
	// ErrBadSignature: the receipt is malformed, or its signature does not
	// verify (it was altered).
	ErrBadSignature = fmt.Errorf("%w: malformed, or its signature does not verify", ErrInvalid)
)

// wireClaims are the claims of a signed receipt, as sent.
type wireClaims struct {
	ID               string `json:"jti"`
	Subject          string `json:"sub"`
	Tenant           string `json:"tenant"`
	Decision         int32  `json:"decision"`
	Reason           int32  `json:"reason"`
	Tool             string `json:"tool"`
	Server           string `json:"server"`
	AudienceClass    string `json:"class,omitempty"`
	Generation       int64  `json:"gen"`
	DescriptorDigest string `json:"dd"`
	PolicyEpoch      int64  `json:"epoch"`
	ArgumentDigest   string `json:"arg"`
	Mode             int32  `json:"mode"`
	Effect           int32  `json:"effect,omitempty"`
	RunID            string `json:"run,omitempty"`
	Replica          string `json:"replica,omitempty"`
	Confirmer        string `json:"confirmer,omitempty"`
	ShownDigest      string `json:"shown,omitempty"`
	// DecidedAt is the decision time, Unix milliseconds.
	DecidedAt int64 `json:"iat_ms"`
	// IssuedAt and Expires are the decision time and valid_until, Unix
	// seconds (valid_until rounded down: never later than admission said).
	IssuedAt int64 `json:"iat"`
	Expires  int64 `json:"exp"`
}

// Decision is a verified signed receipt: the receipt's decision fields and
// until when it may be relied on.
type Decision struct {
	// Receipt carries the signed fields (decided_at to the millisecond).
	Receipt *admissionv1.Receipt
	// ValidUntil is the signed `exp` (valid_until rounded down to the
	// second).
	ValidUntil time.Time
}

// Sign returns the signed receipt of r, valid until validUntil, signed with
// key. Only an ALLOW with an id, a tenant and a subject is signed.
func Sign(key keyring.Key, r *admissionv1.Receipt, validUntil time.Time) (string, error) {
	if r.GetDecision() != admissionv1.Decision_DECISION_ALLOW {
		return "", errors.New("signed receipt: only an ALLOW is signed")
	}
	if r.GetReceiptId() == "" || r.GetTenantId() == "" || r.GetSubject() == "" {
		return "", errors.New("signed receipt: the receipt lacks its id, tenant or subject")
	}
	if key.Signer == nil || key.ID == "" {
		return "", errors.New("signed receipt: the signing key must be Ed25519 with a key id")
	}
	if _, ok := publicOf(key.Signer); !ok {
		return "", errors.New("signed receipt: the signing key must be Ed25519 with a key id")
	}
	if !validKeyID(key.ID) {
		return "", errors.New("signed receipt: the key id must be printable ASCII without quotes or backslashes, at most 256 bytes")
	}
	h := appendHeader(make([]byte, 0, len(headerPrefix)+len(key.ID)+len(headerSuffix)), key.ID)
	at := r.GetDecidedAt().AsTime()
	payload, err := json.Marshal(wireClaims{
		ID: r.GetReceiptId(), Subject: r.GetSubject(), Tenant: r.GetTenantId(),
		Decision: int32(r.GetDecision()), Reason: int32(r.GetReason()),
		Tool: r.GetToolId(), Server: r.GetServerId(), AudienceClass: r.GetAudienceClass(),
		Generation: r.GetGeneration(), DescriptorDigest: r.GetDescriptorDigest(), PolicyEpoch: r.GetPolicyEpoch(),
		ArgumentDigest: r.GetArgumentDigest(), Mode: int32(r.GetMode()), Effect: int32(r.GetEffectClass()),
		RunID: r.GetRunId(), Replica: r.GetReplica(), Confirmer: r.GetConfirmer(), ShownDigest: r.GetShownDigest(),
		DecidedAt: at.UnixMilli(), IssuedAt: at.Unix(), Expires: validUntil.Unix(),
	})
	if err != nil {
		return "", err
	}
	tok, err := keyring.SignCompact(key.Signer, h, payload)
	if err != nil {
		return "", fmt.Errorf("signed receipt: %w", err)
	}
	return tok, nil
}

// Parse checks the signed receipt's size, header, key and signature
// against keys, then the shape of its claims, and returns its decision. It
// does not look at the time, the principal or the decision: the caller's
// rules do. Every refusal wraps [ErrInvalid]; an unknown key is
// [ErrUnknownKey], anything else [ErrBadSignature].
//
// It reads the compact JWS itself rather than through a general JOSE
// parser: a receipt has one header, the bytes [Sign] writes (alg EdDSA, the
// key id, typ receipt+jwt; nothing else, in that order), every segment is
// canonical unpadded base64url, the signature is Ed25519's 64 bytes,
// checked with ed25519.Verify over the header and payload as sent, and the
// claims name each member once, spelt as Sign spells them.
func Parse(compact string, keys keyring.KeySet) (Decision, error) {
	if compact == "" || len(compact) > MaxTokenBytes {
		return Decision{}, ErrBadSignature
	}
	jws, ok := splitCompact(compact)
	if !ok {
		return Decision{}, ErrBadSignature
	}
	pub, ok := keys.Key(jws.kid)
	if !ok {
		return Decision{}, ErrUnknownKey
	}
	if len(pub) != ed25519.PublicKeySize || !ed25519.Verify(pub, jws.input, jws.signature) {
		return Decision{}, ErrBadSignature
	}
	payload := jws.payload
	w, plain := decodeClaims(payload)
	if !plain {
		if err := json.Unmarshal(payload, &w); err != nil || !strictMembers(payload) {
			return Decision{}, ErrBadSignature
		}
	}
	if w.ID == "" || w.Tenant == "" || w.Subject == "" || w.Expires <= 0 {
		return Decision{}, ErrBadSignature
	}
	decided := timestamppb.New(time.UnixMilli(w.DecidedAt))
	r := &admissionv1.Receipt{
		ReceiptId: w.ID, Decision: admissionv1.Decision(w.Decision), Reason: catalogv1.DecisionReason(w.Reason),
		TenantId: w.Tenant, Subject: w.Subject, ToolId: w.Tool, ServerId: w.Server, AudienceClass: w.AudienceClass,
		Generation: w.Generation, DescriptorDigest: w.DescriptorDigest, PolicyEpoch: w.PolicyEpoch,
		ArgumentDigest: w.ArgumentDigest, Mode: admissionv1.Mode(w.Mode), RunId: w.RunID, DecidedAt: decided,
		Replica: w.Replica, EffectClass: catalogv1.EffectClass(w.Effect), Confirmer: w.Confirmer, ShownDigest: w.ShownDigest,
	}
	if w.Confirmer != "" {
		r.ConfirmedAt = decided
	}
	return Decision{Receipt: r, ValidUntil: time.Unix(w.Expires, 0)}, nil
}

// publicOf is the Ed25519 public key of a signer; false for another kind.
func publicOf(s crypto.Signer) (ed25519.PublicKey, bool) {
	pub, ok := s.Public().(ed25519.PublicKey)
	return pub, ok
}

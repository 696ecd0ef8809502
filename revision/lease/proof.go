package lease

import (
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Proof constants.
const (
	// ProofType is the `typ` header of a holder proof.
	ProofType = "lease-proof+jwt"
	// MaxProofBytes bounds a proof; a longer one is refused unread.
	MaxProofBytes = 4 << 10
)

// ProofClaims are what a holder proof says: this holder presents lease
// LeaseID, for arguments ArgumentDigest, to executor Audience, at IssuedAt.
type ProofClaims struct {
	// LeaseID is the lease's `jti`.
	LeaseID string `json:"jti"`
	// ArgumentDigest is the lease's argument digest (`arg`).
	ArgumentDigest string `json:"arg"`
	// Audience is the executor (`aud`).
	Audience string `json:"aud"`
	// IssuedAt is when the proof was made (`iat`, Unix seconds).
	IssuedAt int64 `json:"iat"`
}

// NewProof returns the holder proof for presenting lease c to its executor
// at now, signed by the holder's private key with the public key in the
// `jwk` header.
func NewProof(holder ed25519.PrivateKey, c Claims, now time.Time) (string, error) {
	return SignProof(holder, ProofClaims{LeaseID: c.ID, ArgumentDigest: c.ArgumentDigest, Audience: c.Audience, IssuedAt: now.Unix()})
}

// SignProof signs arbitrary proof claims; [NewProof] is the usual way, and
// a holder that signs many proofs keeps a [ProofSigner].
func SignProof(holder ed25519.PrivateKey, p ProofClaims) (string, error) {
	s, err := NewProofSigner(holder)
	if err != nil {
		return "", err
	}
	return s.Sign(p)
}

// parseProof checks a proof's size, header and signature by its embedded
// key, and returns its claims and the thumbprint of that key. A header
// remembered in cache (nil: none) is not parsed again.
func parseProof(compact string, cache *HeaderCache) (ProofClaims, string, *Refusal) {
	if compact == "" {
		return ProofClaims{}, "", refuse(BadProof, "no holder proof")
	}
	if len(compact) > MaxProofBytes {
		return ProofClaims{}, "", refuse(BadProof, "the holder proof is longer than %d bytes", MaxProofBytes)
	}
	if header, rest, ok := strings.Cut(compact, "."); ok {
		if k, ok := cache.proof(header); ok {
			payload, sig, input, ok := splitKnown(header, rest)
			if !ok {
				return ProofClaims{}, "", refuse(BadProof, "the holder proof is not an EdDSA compact JWS")
			}
			if !ed25519.Verify(k.pub, input, sig) {
				return ProofClaims{}, "", refuse(BadProof, "the holder proof's signature does not verify")
			}
			return proofClaims(payload, k.thumb)
		}
	}
	jws, err := jose.ParseSignedCompact(compact, algorithms)
	if err != nil {
		return ProofClaims{}, "", refuse(BadProof, "the holder proof is not an EdDSA compact JWS")
	}
	if len(jws.Signatures) != 1 {
		return ProofClaims{}, "", refuse(BadProof, "the holder proof must have exactly one signature")
	}
	h := jws.Signatures[0].Protected
	if typ, _ := h.ExtraHeaders[jose.HeaderType].(string); typ != ProofType {
		return ProofClaims{}, "", refuse(BadProof, "the proof's typ is not %s", ProofType)
	}
	if h.JSONWebKey == nil {
		return ProofClaims{}, "", refuse(BadProof, "the holder proof carries no jwk header")
	}
	pub, ok := h.JSONWebKey.Key.(ed25519.PublicKey)
	if !ok || !h.JSONWebKey.IsPublic() {
		return ProofClaims{}, "", refuse(BadProof, "the proof's jwk is not an Ed25519 public key")
	}
	payload, err := jws.Verify(pub)
	if err != nil {
		return ProofClaims{}, "", refuse(BadProof, "the holder proof's signature does not verify")
	}
	thumb := Thumbprint(pub)
	cache.putProof(compact, h, proofHeader{pub: pub, thumb: thumb})
	return proofClaims(payload, thumb)
}

// proofClaims decodes the claims of a proof whose signature verified.
func proofClaims(payload []byte, thumb string) (ProofClaims, string, *Refusal) {
	var p ProofClaims
	if err := json.Unmarshal(payload, &p); err != nil || p.IssuedAt == 0 {
		return ProofClaims{}, "", refuse(BadProof, "the holder proof's claims are malformed")
	}
	return p, thumb, nil
}

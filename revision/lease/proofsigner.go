package lease

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/toolcrib/toolcrib/platform/keyring"
)

// ProofSigner signs the holder proofs of one holder key. A proof's
// protected header ({alg, jwk, typ}, the holder's public key embedded) is
// the same for every proof of the holder, so it is encoded once, byte for
// byte as a go-jose signer with EmbedJWK writes it (a verifier's
// [HeaderCache] sees one header per holder either way); each proof then
// costs one JSON encoding of its claims and one Ed25519 signature. Safe for
// concurrent use.
type ProofSigner struct {
	key    ed25519.PrivateKey
	header []byte // the protected header's JSON
}

// proofHeaderJSON is a proof's protected header: the fields in the order
// go-jose writes them (sorted by name).
type proofHeaderJSON struct {
	Alg string           `json:"alg"`
	JWK *jose.JSONWebKey `json:"jwk"`
	Typ string           `json:"typ"`
}

// NewProofSigner returns the signer of holder's proofs.
func NewProofSigner(holder ed25519.PrivateKey) (*ProofSigner, error) {
	if len(holder) != ed25519.PrivateKeySize {
		return nil, errors.New("lease: proof: the holder key must be an Ed25519 private key")
	}
	pub := holder.Public().(ed25519.PublicKey)
	header, err := json.Marshal(proofHeaderJSON{Alg: string(jose.EdDSA), JWK: &jose.JSONWebKey{Key: pub}, Typ: ProofType})
	if err != nil {
		return nil, fmt.Errorf("lease: proof: %w", err)
	}
	return &ProofSigner{key: holder, header: header}, nil
}

// Sign returns the proof of claims p as a compact JWS.
func (s *ProofSigner) Sign(p ProofClaims) (string, error) {
	payload, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	tok, err := keyring.SignCompact(s.key, s.header, payload)
	if err != nil {
		return "", fmt.Errorf("lease: proof: %w", err)
	}
	return tok, nil
}

// NewProof is [NewProof] with this signer's key.
func (s *ProofSigner) NewProof(c Claims, now time.Time) (string, error) {
	return s.Sign(ProofClaims{LeaseID: c.ID, ArgumentDigest: c.ArgumentDigest, Audience: c.Audience, IssuedAt: now.Unix()})
}

package lease

import (
	"crypto"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/toolcrib/toolcrib/platform/keyring"
)

// Token constants.
const (
	// TokenType is the `typ` header of a lease.
	TokenType = "lease+jwt"
	// MaxTTL is the longest a lease may live (I9): `exp - iat` never
	// exceeds it.
	MaxTTL = 60 * time.Second
	// MaxTokenBytes bounds a lease token; a longer one is refused unread.
	MaxTokenBytes = 8 << 10
	// MaxJWKBytes bounds a holder public JWK.
	MaxJWKBytes = 1 << 10
)

// algorithms is the allow-list of every JWS this package parses: EdDSA
// (Ed25519) and nothing else, so `none`, HMAC and key-confusion tricks are
// refused while parsing.
var algorithms = []jose.SignatureAlgorithm{jose.EdDSA}

// Claims are the claims of a lease (LeaseClaims in lease.proto).
type Claims struct {
	// ID is the lease id (`jti`), unique per lease.
	ID string
	// Issuer is the lease service (`iss`).
	Issuer string
	// Subject is the principal's subject (`sub`).
	Subject string
	// Tenant is the principal's tenant; empty for platform principals.
	Tenant string
	// Tool is the tool id.
	Tool string
	// Server is the server id.
	Server string
	// AudienceClass is the audience class the tool was resolved through.
	AudienceClass string
	// DescriptorDigest is the descriptor digest the decision was made on.
	DescriptorDigest string
	// Generation is the catalog generation, from 1.
	Generation int64
	// PolicyEpoch is the tenant's policy epoch of the decision.
	PolicyEpoch int64
	// ArgumentDigest is `sha256:<hex>` of the canonical arguments JSON.
	ArgumentDigest string
	// Audience is the executor that may accept the lease (`aud`).
	Audience string
	// HolderThumbprint is the RFC 7638 thumbprint of the holder's public key
	// (`cnf.jkt`), base64url without padding.
	HolderThumbprint string
	// Receipt is the admission receipt id the lease was issued for.
	Receipt string
	// IssuedAt (`iat`) and ExpiresAt (`exp`), whole seconds.
	IssuedAt, ExpiresAt time.Time
}

// wireClaims is the JSON form. Short names keep the token small; the
// registered JWT names are used where one exists.
type wireClaims struct {
	ID               string       `json:"jti"`
	Issuer           string       `json:"iss,omitempty"`
	Subject          string       `json:"sub"`
	Tenant           string       `json:"tenant,omitempty"`
	Tool             string       `json:"tool"`
	Server           string       `json:"srv"`
	AudienceClass    string       `json:"acl,omitempty"`
	DescriptorDigest string       `json:"dd"`
	Generation       int64        `json:"gen"`
	PolicyEpoch      int64        `json:"epoch"`
	ArgumentDigest   string       `json:"arg"`
	Audience         string       `json:"aud"`
	Confirmation     confirmation `json:"cnf"`
	Receipt          string       `json:"rcpt,omitempty"`
	IssuedAt         int64        `json:"iat"`
	ExpiresAt        int64        `json:"exp"`
}

type confirmation struct {
	JKT string `json:"jkt"`
}

func (c Claims) wire() wireClaims {
	return wireClaims{
		ID: c.ID, Issuer: c.Issuer, Subject: c.Subject, Tenant: c.Tenant, Tool: c.Tool, Server: c.Server,
		AudienceClass: c.AudienceClass, DescriptorDigest: c.DescriptorDigest, Generation: c.Generation,
		PolicyEpoch: c.PolicyEpoch, ArgumentDigest: c.ArgumentDigest, Audience: c.Audience,
		Confirmation: confirmation{JKT: c.HolderThumbprint}, Receipt: c.Receipt,
		IssuedAt: c.IssuedAt.Unix(), ExpiresAt: c.ExpiresAt.Unix(),
	}
}

func (w wireClaims) claims() Claims {
	return Claims{
		ID: w.ID, Issuer: w.Issuer, Subject: w.Subject, Tenant: w.Tenant, Tool: w.Tool, Server: w.Server,
		AudienceClass: w.AudienceClass, DescriptorDigest: w.DescriptorDigest, Generation: w.Generation,
		PolicyEpoch: w.PolicyEpoch, ArgumentDigest: w.ArgumentDigest, Audience: w.Audience,
		HolderThumbprint: w.Confirmation.JKT, Receipt: w.Receipt,
		IssuedAt: time.Unix(w.IssuedAt, 0).UTC(), ExpiresAt: time.Unix(w.ExpiresAt, 0).UTC(),
	}
}

// validate reports the first claim that a lease must have and c lacks.
func (c Claims) validate() error {
	switch {
	case c.ID == "":
		return errors.New("no lease id (jti)")
	case c.Subject == "":
		return errors.New("no subject")
	case c.Tool == "":
		return errors.New("no tool id")
	case c.Server == "":
		return errors.New("no server id")
	case c.DescriptorDigest == "":
		return errors.New("no descriptor digest")
	case c.Generation < 1:
		return errors.New("generation must be at least 1")
	case c.PolicyEpoch < 0:
		return errors.New("policy epoch must not be negative")
	case c.ArgumentDigest == "":
		return errors.New("no argument digest")
	case c.Audience == "":
		return errors.New("no audience")
	case c.HolderThumbprint == "":
		return errors.New("no holder thumbprint (cnf.jkt)")
	case c.IssuedAt.IsZero() || c.ExpiresAt.IsZero():
		return errors.New("no iat or exp")
	case !c.ExpiresAt.After(c.IssuedAt):
		return errors.New("exp is not after iat")
	case c.ExpiresAt.Sub(c.IssuedAt) > MaxTTL:
		return fmt.Errorf("lifetime %s exceeds %s", c.ExpiresAt.Sub(c.IssuedAt), MaxTTL)
	}
	return nil
}

// SigningKey is one of the lease service's Ed25519 signing keys. Signer may
// keep the private key out of the process (a KMS): only its Sign is called,
// with the bytes to sign and crypto.Hash(0), as ed25519 requires.
type SigningKey struct {
	// ID is the key id (`kid`).
	ID string
	// Signer signs; its Public() is an ed25519.PublicKey.
	Signer crypto.Signer
}

// tokenHeader is the protected header of a lease, in go-jose's order.
type tokenHeader struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	Typ string `json:"typ"`
}

// Sign returns the compact JWS of c signed with key. It refuses claims a
// verifier would refuse (a missing claim, a lifetime over [MaxTTL]), so the
// service never hands out a lease that cannot be accepted.
func Sign(key SigningKey, c Claims) (string, error) {
	if err := c.validate(); err != nil {
		return "", fmt.Errorf("lease: sign: %w", err)
	}
	if _, ok := key.Signer.Public().(ed25519.PublicKey); !ok || key.ID == "" {
		return "", errors.New("lease: sign: the signing key must be Ed25519 with a key id")
	}
	return signCompact(key.Signer, appendHeader(nil, key.ID), appendWire(make([]byte, 0, 640), c.wire()))
}

// appendHeader appends the JSON of a lease's protected header signed by
// the key kid, exactly as json.Marshal writes the [tokenHeader].
func appendHeader(b []byte, kid string) []byte {
	b = append(b, `{"alg":"`+string(jose.EdDSA)+`","kid":`...)
	b = appendString(b, kid)
	return append(b, `,"typ":"`+TokenType+`"}`...)
}

// appendWire appends the JSON of w exactly as json.Marshal writes it (by
// hand: Issue signs one lease per call, and reflection was a fifth of the
// signature's cost).
func appendWire(b []byte, w wireClaims) []byte {
	b = append(b, `{"jti":`...)
	b = appendString(b, w.ID)
	if w.Issuer != "" {
		b = append(b, `,"iss":`...)
		b = appendString(b, w.Issuer)
	}
	b = append(b, `,"sub":`...)
	b = appendString(b, w.Subject)
	if w.Tenant != "" {
		b = append(b, `,"tenant":`...)
		b = appendString(b, w.Tenant)
	}
	b = append(b, `,"tool":`...)
	b = appendString(b, w.Tool)
	b = append(b, `,"srv":`...)
	b = appendString(b, w.Server)
	if w.AudienceClass != "" {
		b = append(b, `,"acl":`...)
		b = appendString(b, w.AudienceClass)
	}
	b = append(b, `,"dd":`...)
	b = appendString(b, w.DescriptorDigest)
	b = append(b, `,"gen":`...)
	b = strconv.AppendInt(b, w.Generation, 10)
	b = append(b, `,"epoch":`...)
	b = strconv.AppendInt(b, w.PolicyEpoch, 10)
	b = append(b, `,"arg":`...)
	b = appendString(b, w.ArgumentDigest)
	b = append(b, `,"aud":`...)
	b = appendString(b, w.Audience)
	b = append(b, `,"cnf":{"jkt":`...)
	b = appendString(b, w.Confirmation.JKT)
	b = append(b, '}')
	if w.Receipt != "" {
		b = append(b, `,"rcpt":`...)
		b = appendString(b, w.Receipt)
	}
	b = append(b, `,"iat":`...)
	b = strconv.AppendInt(b, w.IssuedAt, 10)
	b = append(b, `,"exp":`...)
	b = strconv.AppendInt(b, w.ExpiresAt, 10)
	return append(b, '}')
}

// appendString appends s as json.Marshal writes a string.
func appendString(b []byte, s string) []byte { return keyring.AppendJSONString(b, s) }

// signCompact is [keyring.SignCompact] with this package's error prefix.
func signCompact(s crypto.Signer, header, payload []byte) (string, error) {
	tok, err := keyring.SignCompact(s, header, payload)
	if err != nil {
		return "", fmt.Errorf("lease: %w", err)
	}
	return tok, nil
}

// KeySet is the set of public keys leases may be signed with (the lease
// service's JWKS), by key id.
type KeySet = keyring.KeySet

// ParseKeySet reads a JWKS ([keyring.ParseKeySet]). Every key must be an
// Ed25519 public key with a unique, non-empty `kid`; a private key is
// refused.
func ParseKeySet(jwks []byte) (KeySet, error) {
	ks, err := keyring.ParseKeySet(jwks)
	if err != nil {
		return KeySet{}, fmt.Errorf("lease: %w", err)
	}
	return ks, nil
}

// NewKeySet returns a key set of the given public keys by id.
func NewKeySet(keys map[string]ed25519.PublicKey) KeySet { return keyring.NewKeySet(keys) }

// MarshalJWKS returns keys as a JWKS document (sorted by id).
func MarshalJWKS(keys map[string]ed25519.PublicKey) ([]byte, error) { return keyring.MarshalJWKS(keys) }

// ErrHolderKey is wrapped by every refusal of a holder key.
var ErrHolderKey = errors.New("the holder key must be an Ed25519 public JWK (kty OKP, crv Ed25519, x; no d)")

// HolderKey is a parsed holder public key.
type HolderKey struct {
	// Public is the key.
	Public ed25519.PublicKey
	// Thumbprint is its RFC 7638 thumbprint (`cnf.jkt`).
	Thumbprint string
}

// ParseHolderKey reads a holder's public key from its JWK. Anything but an
// Ed25519 public JWK — another key type or curve, a private key (`d`), a
// key of the wrong length, more than [MaxJWKBytes] — wraps [ErrHolderKey].
func ParseHolderKey(jwk []byte) (HolderKey, error) {
	if len(jwk) > MaxJWKBytes {
		return HolderKey{}, fmt.Errorf("%w: longer than %d bytes", ErrHolderKey, MaxJWKBytes)
	}
	pub, _, err := parsePublicJWK(jwk)
	if err != nil {
		return HolderKey{}, fmt.Errorf("%w: %v", ErrHolderKey, err)
	}
	return HolderKey{Public: pub, Thumbprint: Thumbprint(pub)}, nil
}

// parsePublicJWK reads an Ed25519 public JWK strictly, returning its key
// and `kid` ([keyring.ParsePublicJWK]).
func parsePublicJWK(b []byte) (ed25519.PublicKey, string, error) { return keyring.ParsePublicJWK(b) }

// Thumbprint returns the RFC 7638 thumbprint of an Ed25519 public key:
// base64url (no padding) of SHA-256 over `{"crv":"Ed25519","kty":"OKP","x":…}`.
func Thumbprint(pub ed25519.PublicKey) string {
	k := jose.JSONWebKey{Key: pub}
	tp, err := k.Thumbprint(crypto.SHA256)
	if err != nil {
		// Unreachable: an ed25519.PublicKey always has a thumbprint.
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(tp)
}

// PublicJWK returns the public JWK of an Ed25519 key, e.g. to send as
// IssueRequest.holder_public_key.
func PublicJWK(pub ed25519.PublicKey) []byte {
	b, err := json.Marshal(jose.JSONWebKey{Key: pub, Algorithm: string(jose.EdDSA), Use: "sig"})
	if err != nil {
		panic(err) // unreachable for an ed25519.PublicKey
	}
	return b
}

// parseToken checks a lease's size, header, `kid` and signature, then the
// shape of its claims. It does not look at the time or the audience. A
// header remembered in cache (nil: none) is not parsed again.
func parseToken(compact string, keys KeySet, cache *HeaderCache) (Claims, *Refusal) {
	if compact == "" {
		return Claims{}, refuse(BadSignature, "no lease token")
	}
	if len(compact) > MaxTokenBytes {
		return Claims{}, refuse(BadSignature, "the lease token is longer than %d bytes", MaxTokenBytes)
	}
	if header, rest, ok := strings.Cut(compact, "."); ok {
		if kid, ok := cache.token(header); ok {
			payload, sig, input, ok := splitKnown(header, rest)
			if !ok {
				return Claims{}, refuse(BadSignature, "the lease token is not an EdDSA compact JWS")
			}
			pub, ok := keys.Key(kid)
			if !ok {
				return Claims{}, refuse(UnknownKey, "the lease is signed with a key the lease service does not publish")
			}
			if !ed25519.Verify(pub, input, sig) {
				return Claims{}, refuse(BadSignature, "the lease's signature does not verify")
			}
			return tokenClaims(payload)
		}
	}
	jws, err := jose.ParseSignedCompact(compact, algorithms)
	if err != nil {
		return Claims{}, refuse(BadSignature, "the lease token is not an EdDSA compact JWS")
	}
	if len(jws.Signatures) != 1 {
		return Claims{}, refuse(BadSignature, "the lease token must have exactly one signature")
	}
	h := jws.Signatures[0].Protected
	if typ, _ := h.ExtraHeaders[jose.HeaderType].(string); typ != TokenType {
		return Claims{}, refuse(BadSignature, "the token's typ is not %s", TokenType)
	}
	if h.JSONWebKey != nil {
		return Claims{}, refuse(BadSignature, "a lease must not embed its key")
	}
	if h.KeyID == "" {
		return Claims{}, refuse(BadSignature, "the lease token names no key (kid)")
	}
	pub, ok := keys.Key(h.KeyID)
	if !ok {
		return Claims{}, refuse(UnknownKey, "the lease is signed with a key the lease service does not publish")
	}
	payload, err := jws.Verify(pub)
	if err != nil {
		return Claims{}, refuse(BadSignature, "the lease's signature does not verify")
	}
	cache.putToken(compact, h)
	return tokenClaims(payload)
}

// tokenClaims decodes and checks the claims of a lease whose signature
// verified.
func tokenClaims(payload []byte) (Claims, *Refusal) {
	var w wireClaims
	// Unknown claims are ignored, so a newer service may add one without
	// breaking older executors.
	if err := json.Unmarshal(payload, &w); err != nil {
		return Claims{}, refuse(BadSignature, "the lease's claims are malformed")
	}
	c := w.claims()
	if err := c.validate(); err != nil {
		return Claims{}, refuse(BadSignature, "the lease's claims are malformed: %v", err)
	}
	return c, nil
}

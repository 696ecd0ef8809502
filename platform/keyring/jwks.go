package keyring

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/go-jose/go-jose/v4"
)

// KeySet is a set of Ed25519 public keys by key id (a service's JWKS).
type KeySet struct {
	keys map[string]ed25519.PublicKey
}

// ParseKeySet reads a JWKS. Every key must be an Ed25519 public key with a
// unique, non-empty `kid`; a private key is refused.
func ParseKeySet(jwks []byte) (KeySet, error) {
	var raw struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(jwks, &raw); err != nil {
		return KeySet{}, fmt.Errorf("JWKS: %w", err)
	}
	ks := KeySet{keys: make(map[string]ed25519.PublicKey, len(raw.Keys))}
	for i, k := range raw.Keys {
		pub, kid, err := ParsePublicJWK(k)
		if err != nil {
			return KeySet{}, fmt.Errorf("JWKS key %d: %w", i, err)
		}
		if kid == "" {
			return KeySet{}, fmt.Errorf("JWKS key %d has no kid", i)
		}
		if _, dup := ks.keys[kid]; dup {
			return KeySet{}, fmt.Errorf("JWKS key id %q appears twice", kid)
		}
		ks.keys[kid] = pub
	}
	return ks, nil
}

// NewKeySet returns a key set of the given public keys by id.
func NewKeySet(keys map[string]ed25519.PublicKey) KeySet {
	ks := KeySet{keys: make(map[string]ed25519.PublicKey, len(keys))}
	for id, k := range keys {
		ks.keys[id] = k
	}
	return ks
}

// Key returns the public key with the id.
func (ks KeySet) Key(id string) (ed25519.PublicKey, bool) {
	k, ok := ks.keys[id]
	return k, ok
}

// Len is the number of keys.
func (ks KeySet) Len() int { return len(ks.keys) }

// MarshalJWKS returns keys as a JWKS document (sorted by id).
func MarshalJWKS(keys map[string]ed25519.PublicKey) ([]byte, error) {
	set := jose.JSONWebKeySet{}
	for id, k := range keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k, KeyID: id, Algorithm: string(jose.EdDSA), Use: "sig"})
	}
	sortKeys(set.Keys)
	return json.Marshal(set)
}

func sortKeys(keys []jose.JSONWebKey) {
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j].KeyID < keys[j-1].KeyID; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
}

// ParsePublicJWK reads an Ed25519 public JWK strictly, returning its key
// and `kid`. A private key, another key type or curve, an `alg` other than
// EdDSA or a key of the wrong length is refused.
func ParsePublicJWK(b []byte) (ed25519.PublicKey, string, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, "", errors.New("not a JSON object")
	}
	str := func(name string) (string, error) {
		v, ok := raw[name]
		if !ok {
			return "", nil
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", fmt.Errorf("%s is not a string", name)
		}
		return s, nil
	}
	for _, private := range []string{"d", "p", "q", "dp", "dq", "qi", "k", "priv"} {
		if _, ok := raw[private]; ok {
			return nil, "", errors.New("a private key; give the public key only")
		}
	}
	kty, err := str("kty")
	if err != nil {
		return nil, "", err
	}
	crv, err := str("crv")
	if err != nil {
		return nil, "", err
	}
	if kty != "OKP" || crv != "Ed25519" {
		return nil, "", errors.New("not kty OKP with crv Ed25519")
	}
	if alg, err := str("alg"); err != nil || (alg != "" && alg != string(jose.EdDSA)) {
		return nil, "", errors.New("alg must be EdDSA when given")
	}
	x, err := str("x")
	if err != nil {
		return nil, "", err
	}
	pub, err := base64.RawURLEncoding.DecodeString(x)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return nil, "", fmt.Errorf("x is not %d base64url bytes", ed25519.PublicKeySize)
	}
	kid, err := str("kid")
	if err != nil {
		return nil, "", err
	}
	return ed25519.PublicKey(pub), kid, nil
}

// AppendJSONString appends s as a JSON string exactly as json.Marshal
// writes it, for signers that write their claims by hand (a lease, a
// signed receipt): printable ASCII other than the characters json.Marshal
// escapes (a quote, a backslash, and <, > and &) is copied; any other
// string is left to encoding/json (ids, digests and names are printable
// ASCII, so that path is rare).
func AppendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, err := json.Marshal(s)
			if err != nil { // a string always encodes
				panic("keyring: " + err.Error())
			}
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// SignCompact returns the compact JWS of header and payload signed by s
// (Ed25519), built as go-jose builds it: base64url without padding of the
// header, a dot, of the payload, the signature over those, a dot, of the
// signature.
func SignCompact(s crypto.Signer, header, payload []byte) (string, error) {
	enc := base64.RawURLEncoding
	b := make([]byte, 0, enc.EncodedLen(len(header))+enc.EncodedLen(len(payload))+enc.EncodedLen(ed25519.SignatureSize)+2)
	b = enc.AppendEncode(b, header)
	b = append(b, '.')
	b = enc.AppendEncode(b, payload)
	sig, err := s.Sign(rand.Reader, b, crypto.Hash(0))
	if err != nil {
		return "", fmt.Errorf("sign: %w", err)
	}
	if len(sig) != ed25519.SignatureSize {
		return "", fmt.Errorf("sign: the signer returned %d bytes, not an Ed25519 signature", len(sig))
	}
	b = append(b, '.')
	b = enc.AppendEncode(b, sig)
	return string(b), nil
}

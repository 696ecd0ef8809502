package lease

import (
	"crypto/ed25519"
	"encoding/base64"
	"strings"
	"sync"

	"github.com/go-jose/go-jose/v4"
	lru "github.com/hashicorp/golang-lru/v2"
)

// maxCachedHeaders bounds each of the two LRU caches of a [HeaderCache]
// (the least recently used header is forgotten). maxCachedHeaderLen bounds
// a header it keeps (a lease's or a proof's is about 150 bytes), so a cache
// holds at most 2 MiB of them.
const (
	maxCachedHeaders   = 4096
	maxCachedHeaderLen = 512
)

// HeaderCache remembers the protected headers of leases and proofs that
// verified, so the next JWS with a byte-identical header skips go-jose's
// header parsing (a JSON decode, and for a proof its JWK and thumbprint).
// Every lease signed with one key has the same header, and so has every
// proof of one holder.
//
// What is remembered is a pure function of the header's bytes, and only a
// header go-jose accepted (alg EdDSA from the allow-list, `typ`, `kid` or
// an Ed25519 public `jwk`) on a JWS whose signature then verified: its
// base64url must be canonical, and it may hold nothing beyond `alg`, `typ`
// and `kid` or `jwk`, so no `crit` or `b64` changes how the signature is
// computed. A JWS with a remembered header is still split into exactly
// three parts, its payload and signature decoded as go-jose does, its
// `kid` looked up in the key set of the call, and its signature verified
// over the same input go-jose verifies. The zero value is ready; it is
// safe for concurrent use.
type HeaderCache struct {
	once   sync.Once
	tokens *lru.Cache[string, string]      // header → kid
	proofs *lru.Cache[string, proofHeader] // header → holder key
}

// init creates the caches on first use, so the zero value is ready.
func (hc *HeaderCache) init() {
	hc.once.Do(func() {
		hc.tokens, _ = lru.New[string, string](maxCachedHeaders)
		hc.proofs, _ = lru.New[string, proofHeader](maxCachedHeaders)
	})
}

type proofHeader struct {
	pub   ed25519.PublicKey
	thumb string
}

func (hc *HeaderCache) token(header string) (kid string, ok bool) {
	if hc == nil {
		return "", false
	}
	hc.init()
	return hc.tokens.Get(header)
}

func (hc *HeaderCache) proof(header string) (proofHeader, bool) {
	if hc == nil {
		return proofHeader{}, false
	}
	hc.init()
	return hc.proofs.Get(header)
}

func (hc *HeaderCache) putToken(compact string, h jose.Header) {
	header, ok := cacheableHeader(compact, h)
	if hc == nil || !ok || h.JSONWebKey != nil || h.KeyID == "" {
		return
	}
	hc.init()
	hc.tokens.Add(header, h.KeyID)
}

func (hc *HeaderCache) putProof(compact string, h jose.Header, p proofHeader) {
	header, ok := cacheableHeader(compact, h)
	if hc == nil || !ok || h.JSONWebKey == nil || h.KeyID != "" {
		return
	}
	hc.init()
	hc.proofs.Add(header, p)
}

// cacheableHeader returns the header segment of compact when h, the header
// go-jose parsed from it, may be remembered: canonical base64url, and
// nothing but alg, typ and kid or jwk.
func cacheableHeader(compact string, h jose.Header) (string, bool) {
	header, _, ok := strings.Cut(compact, ".")
	if !ok || len(header) > maxCachedHeaderLen || h.Algorithm != string(jose.EdDSA) || h.Nonce != "" || len(h.ExtraHeaders) != 1 {
		return "", false
	}
	if _, ok := h.ExtraHeaders[jose.HeaderType]; !ok {
		return "", false
	}
	raw, err := base64.RawURLEncoding.DecodeString(header)
	if err != nil || base64.RawURLEncoding.EncodeToString(raw) != header {
		return "", false
	}
	return header, true
}

// splitKnown splits a compact JWS whose header is remembered into its
// decoded payload and signature and the signing input, as go-jose's
// ParseSignedCompact and Verify do: exactly three parts, payload and
// signature unpadded base64url, the input the header segment, a dot and the
// payload re-encoded. ok is false when go-jose would refuse to parse it.
func splitKnown(header, rest string) (payload, sig, input []byte, ok bool) {
	claims, s, found := strings.Cut(rest, ".")
	if !found || strings.Contains(s, ".") {
		return nil, nil, nil, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(claims)
	if err != nil {
		return nil, nil, nil, false
	}
	sig, err = base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, nil, nil, false
	}
	input = make([]byte, 0, len(header)+1+base64.RawURLEncoding.EncodedLen(len(payload)))
	input = append(input, header...)
	input = append(input, '.')
	input = base64.RawURLEncoding.AppendEncode(input, payload)
	return payload, sig, input, true
}

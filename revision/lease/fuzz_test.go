package lease

import (
	"crypto/ed25519"
	"testing"
	"time"
)

// FuzzCheck feeds arbitrary tokens and proofs to Check: it never panics,
// and nothing but a lease signed by the key set's key is accepted.
func FuzzCheck(f *testing.F) {
	key, pub := newSigningKey(&testing.T{}, "k1")
	priv, holder := newHolder(&testing.T{})
	c := sampleClaims(holder)
	tok, _ := Sign(key, c)
	proof, _ := NewProof(priv, c, t0)
	f.Add(tok, proof)
	f.Add(tok[:len(tok)-3], proof)
	f.Add(tok, proof[:len(proof)-1]+"A")
	f.Add("eyJhbGciOiJub25lIn0.e30.", "")
	f.Fuzz(func(t *testing.T, token, proof string) {
		keys := NewKeySet(map[string]ed25519.PublicKey{"k1": pub})
		got, r := Check(Input{Token: token, Proof: proof, Audience: c.Audience, Tool: c.Tool, ArgumentDigest: c.ArgumentDigest,
			Keys: keys, Now: t0.Add(time.Second)})
		if r == nil && (got == nil || got.Audience != c.Audience) {
			t.Fatalf("accepted without claims for the audience: %+v", got)
		}
	})
}

// FuzzParseHolderKey: arbitrary bytes never panic, and whatever is accepted
// is a 32-byte key whose thumbprint round-trips through PublicJWK.
func FuzzParseHolderKey(f *testing.F) {
	f.Add([]byte(`{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}`))
	f.Add([]byte(`{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","d":""}`))
	f.Add([]byte(`{"kty":"EC"}`))
	f.Fuzz(func(t *testing.T, jwk []byte) {
		k, err := ParseHolderKey(jwk)
		if err != nil {
			return
		}
		again, err := ParseHolderKey(PublicJWK(k.Public))
		if err != nil || again.Thumbprint != k.Thumbprint || len(k.Public) != ed25519.PublicKeySize {
			t.Fatalf("accepted key does not round-trip: %v", err)
		}
	})
}

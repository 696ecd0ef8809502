package lease

import (
	"crypto/ed25519"
	"strings"
	"testing"
	"time"
)

// FuzzCheck feeds arbitrary tokens and proofs to Check: it never panics,
// nothing but a lease signed by the key set's key is accepted, and a
// [HeaderCache] that remembers the genuine lease's and proof's headers
// changes no answer.
func FuzzCheck(f *testing.F) {
	key, pub := newSigningKey(&testing.T{}, "k1")
	priv, holder := newHolder(&testing.T{})
	c := sampleClaims(holder)
	tok, _ := Sign(key, c)
	proof, _ := NewProof(priv, c, t0)
	f.Add(tok, proof)
	f.Add(tok[:len(tok)-3], proof)
	f.Add(tok, proof[:len(proof)-1]+"A")
	f.Add(tok+".", proof)
	f.Add(tok, strings.Replace(proof, ".", ".\n", 1))
	f.Add("eyJhbGciOiJub25lIn0.e30.", "")
	keys := NewKeySet(map[string]ed25519.PublicKey{"k1": pub})
	warm := &HeaderCache{}
	if _, r := Check(Input{Token: tok, Proof: proof, Audience: c.Audience, Tool: c.Tool, ArgumentDigest: c.ArgumentDigest,
		Keys: keys, Now: t0.Add(time.Second), Headers: warm}); r != nil || warm.tokens.Len() != 1 || warm.proofs.Len() != 1 {
		f.Fatalf("the genuine lease and proof: %v, %d and %d headers remembered", r, warm.tokens.Len(), warm.proofs.Len())
	}
	f.Fuzz(func(t *testing.T, token, proof string) {
		in := Input{Token: token, Proof: proof, Audience: c.Audience, Tool: c.Tool, ArgumentDigest: c.ArgumentDigest,
			Keys: keys, Now: t0.Add(time.Second)}
		got, r := Check(in)
		if r == nil && (got == nil || got.Audience != c.Audience) {
			t.Fatalf("accepted without claims for the audience: %+v", got)
		}
		in.Headers = warm
		cached, rc := Check(in)
		if (r == nil) != (rc == nil) || (r != nil && *r != *rc) || (got == nil) != (cached == nil) || (got != nil && *got != *cached) {
			t.Fatalf("with headers remembered: %+v, %v; without: %+v, %v", cached, rc, got, r)
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

// FuzzProofBindsOneLease signs arbitrary proof claims (lease id, argument
// digest, audience, issue time) with the holder's key or another key, and
// presents lease and proof to an executor of an arbitrary audience: Check
// accepts only the exact lease id, argument digest and audience of the
// lease, the holder's key and a fresh `iat`; a proof made for another
// lease, carried to another executor, or signed by anyone else is refused
// with its own failure.
func FuzzProofBindsOneLease(f *testing.F) {
	key, pub := newSigningKey(&testing.T{}, "k1")
	priv, holder := newHolder(&testing.T{})
	otherPriv, _ := newHolder(&testing.T{})
	c := sampleClaims(holder)
	tok, _ := Sign(key, c)
	f.Add(c.ID, c.ArgumentDigest, c.Audience, int64(0), c.Audience, false)
	f.Add("lease-2", c.ArgumentDigest, c.Audience, int64(0), c.Audience, false)
	f.Add(c.ID, c.ArgumentDigest, "executor.billing", int64(0), "executor.billing", false)
	f.Add(c.ID, c.ArgumentDigest, c.Audience, int64(0), "executor.billing", false)
	f.Add(c.ID, "sha256:"+strings.Repeat("c", 64), c.Audience, int64(0), c.Audience, false)
	f.Add(c.ID, c.ArgumentDigest, c.Audience, int64(-31), c.Audience, false)
	f.Add(c.ID, c.ArgumentDigest, c.Audience, int64(6), c.Audience, false)
	f.Add(c.ID, c.ArgumentDigest, c.Audience, int64(0), c.Audience, true)
	f.Add(c.ID+"\x00", c.ArgumentDigest, c.Audience, int64(0), c.Audience, false)
	keys := NewKeySet(map[string]ed25519.PublicKey{"k1": pub})
	now := t0.Add(time.Second)
	f.Fuzz(func(t *testing.T, jti, arg, aud string, iatOffset int64, executor string, otherKey bool) {
		signer := priv
		if otherKey {
			signer = otherPriv
		}
		iatOffset = max(min(iatOffset, 1<<20), -(1 << 20))
		proof, err := SignProof(signer, ProofClaims{LeaseID: jti, ArgumentDigest: arg, Audience: aud, IssuedAt: now.Unix() + iatOffset})
		if err != nil {
			t.Fatal(err)
		}
		_, r := Check(Input{Token: tok, Proof: proof, Audience: executor, Tool: c.Tool, ArgumentDigest: c.ArgumentDigest, Keys: keys, Now: now})
		exact := jti == c.ID && arg == c.ArgumentDigest && aud == c.Audience && executor == c.Audience && !otherKey &&
			iatOffset >= -int64(DefaultProofWindow/time.Second) && iatOffset <= int64(DefaultSkew/time.Second)
		if (r == nil) != exact {
			t.Fatalf("proof jti %q arg %q aud %q iat %+d, other key %v, executor %q: refusal %v, want accepted=%v", jti, arg, aud, iatOffset, otherKey, executor, r, exact)
		}
		var want Failure
		switch {
		case exact:
			return
		case executor != c.Audience:
			want = WrongAudience
		case otherKey:
			want = ProofOtherHolder
		case jti != c.ID:
			want = ProofOtherLease
		case aud != c.Audience:
			want = ProofWrongAudience
		case arg != c.ArgumentDigest:
			want = ProofOtherArguments
		default:
			want = ProofStale
		}
		if r.Failure != want {
			t.Fatalf("proof jti %q arg %q aud %q iat %+d, other key %v, executor %q: %v, want %v", jti, arg, aud, iatOffset, otherKey, executor, r.Failure, want)
		}
	})
}

package lease

import (
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
)

// goJoseProof is a proof as a go-jose signer with EmbedJWK writes it (how
// SignProof made every proof before [ProofSigner]): the oracle of the
// tests below.
func goJoseProof(t testing.TB, holder ed25519.PrivateKey, p ProofClaims) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: holder},
		&jose.SignerOptions{EmbedJWK: true, ExtraHeaders: map[jose.HeaderKey]any{jose.HeaderType: ProofType}})
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	compact, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return compact
}

// A ProofSigner's proof is byte for byte go-jose's (Ed25519 signatures are
// deterministic): the same header, so a verifier's HeaderCache keeps one
// entry per holder, the same payload and the same signature. It parses and
// verifies through go-jose and through Check, parsed and remembered.
func TestProofSignerWritesWhatGoJoseWrites(t *testing.T) {
	holder, hk := newHolder(t)
	c := sampleClaims(hk)
	s, err := NewProofSigner(holder)
	if err != nil {
		t.Fatal(err)
	}
	p := ProofClaims{LeaseID: c.ID, ArgumentDigest: c.ArgumentDigest, Audience: c.Audience, IssuedAt: t0.Unix()}
	got, err := s.Sign(p)
	if err != nil {
		t.Fatal(err)
	}
	if want := goJoseProof(t, holder, p); got != want {
		t.Fatalf("proof\n %s\nwant go-jose's\n %s", got, want)
	}
	again, err := s.NewProof(c, t0)
	if err != nil || again != got {
		t.Fatalf("NewProof = %q, %v; want Sign's proof", again, err)
	}
	viaFunc, err := SignProof(holder, p)
	if err != nil || viaFunc != got {
		t.Fatalf("SignProof = %q, %v; want the signer's proof", viaFunc, err)
	}
	jws, err := jose.ParseSignedCompact(got, algorithms)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jws.Verify(hk.Public); err != nil {
		t.Fatalf("go-jose does not verify the proof: %v", err)
	}

	key, pub := newSigningKey(t, "k1")
	tok, err := Sign(key, c)
	if err != nil {
		t.Fatal(err)
	}
	in := Input{Token: tok, Proof: got, Audience: c.Audience, Tool: c.Tool, ArgumentDigest: c.ArgumentDigest,
		Keys: NewKeySet(map[string]ed25519.PublicKey{"k1": pub}), Now: t0, Headers: &HeaderCache{}}
	for _, round := range []string{"parsed", "remembered"} {
		if _, r := Check(in); r != nil {
			t.Fatalf("%s: Check refused the signer's proof: %v", round, r)
		}
	}
}

// A proof signed by one holder's signer does not pass for another holder:
// the lease binds the other's thumbprint, and Check refuses it.
func TestProofSignerOfAnotherHolderIsRefused(t *testing.T) {
	holder, _ := newHolder(t)
	_, other := newHolder(t)
	c := sampleClaims(other)
	s, err := NewProofSigner(holder)
	if err != nil {
		t.Fatal(err)
	}
	proof, err := s.NewProof(c, t0)
	if err != nil {
		t.Fatal(err)
	}
	key, pub := newSigningKey(t, "k1")
	tok, err := Sign(key, c)
	if err != nil {
		t.Fatal(err)
	}
	_, r := Check(Input{Token: tok, Proof: proof, Audience: c.Audience, Tool: c.Tool, ArgumentDigest: c.ArgumentDigest,
		Keys: NewKeySet(map[string]ed25519.PublicKey{"k1": pub}), Now: t0})
	if r == nil {
		t.Fatal("a proof by another holder's key was accepted")
	}
}

func TestNewProofSignerRefusesAKeyThatIsNotEd25519(t *testing.T) {
	for _, k := range []ed25519.PrivateKey{nil, ed25519.PrivateKey(make([]byte, 31))} {
		if _, err := NewProofSigner(k); err == nil || !strings.Contains(err.Error(), "Ed25519") {
			t.Fatalf("NewProofSigner(%d bytes) = %v; want an error naming Ed25519", len(k), err)
		}
	}
}

// BenchmarkProof is a holder proof made by a go-jose signer per proof (as
// before) and by a kept ProofSigner (the gateway's, once per call).
func BenchmarkProof(b *testing.B) {
	holder, hk := newHolder(&testing.T{})
	c := sampleClaims(hk)
	p := ProofClaims{LeaseID: c.ID, ArgumentDigest: c.ArgumentDigest, Audience: c.Audience, IssuedAt: t0.Unix()}
	b.Run("go-jose", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			goJoseProof(b, holder, p)
		}
	})
	s, err := NewProofSigner(holder)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("signer", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Sign(p); err != nil {
				b.Fatal(err)
			}
		}
	})
}

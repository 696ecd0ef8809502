package lease

import (
	"crypto/ed25519"
	"testing"
	"time"
)

// BenchmarkCheck is one Verify's stateless work: a lease and a fresh proof
// checked, with every header parsed and with the headers remembered.
func BenchmarkCheck(b *testing.B) {
	key, pub := newSigningKey(&testing.T{}, "k1")
	priv, holder := newHolder(&testing.T{})
	c := sampleClaims(holder)
	tok, err := Sign(key, c)
	if err != nil {
		b.Fatal(err)
	}
	proof, err := NewProof(priv, c, t0)
	if err != nil {
		b.Fatal(err)
	}
	in := Input{Token: tok, Proof: proof, Audience: c.Audience, Tool: c.Tool, ArgumentDigest: c.ArgumentDigest,
		Keys: NewKeySet(map[string]ed25519.PublicKey{"k1": pub}), Now: t0.Add(time.Second)}
	for _, cached := range []bool{false, true} {
		name := "parsed"
		if cached {
			name, in.Headers = "remembered", &HeaderCache{}
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, r := Check(in); r != nil {
					b.Fatal(r)
				}
			}
		})
	}
}

// BenchmarkSign is Issue's signature of a lease.
func BenchmarkSign(b *testing.B) {
	key, _ := newSigningKey(&testing.T{}, "k1")
	_, holder := newHolder(&testing.T{})
	c := sampleClaims(holder)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Sign(key, c); err != nil {
			b.Fatal(err)
		}
	}
}

package signedreceipt

import (
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// BenchmarkSign is what admission adds to each ALLOW.
func BenchmarkSign(b *testing.B) {
	k, r := newKey(b), allow()
	defer cpuPerOp(b)()
	for b.Loop() {
		if _, err := Sign(k, r, t0.Add(5*time.Second)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParse is what the lease service spends verifying one signed
// receipt in Issue (instead of a GetReceipt round trip).
func BenchmarkParse(b *testing.B) {
	k := newKey(b)
	tok, err := Sign(k, allow(), t0.Add(5*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	ks := keySet(k)
	defer cpuPerOp(b)()
	for b.Loop() {
		if _, err := Parse(tok, ks); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEd25519 is the floor of one signed receipt: one Ed25519
// signature over a signing input of a receipt's size.
func BenchmarkEd25519(b *testing.B) {
	k := newKey(b)
	tok, err := Sign(k, allow(), t0.Add(5*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	in := []byte(tok[:strings.LastIndexByte(tok, '.')])
	priv := k.Signer.(ed25519.PrivateKey)
	b.ReportAllocs()
	for b.Loop() {
		ed25519.Sign(priv, in)
	}
}

// BenchmarkParseGoJose is the parse Parse replaced, for comparison in the
// same run: go-jose's compact parser with the EdDSA allow-list, its Verify,
// then the same claims decode.
func BenchmarkParseGoJose(b *testing.B) {
	k := newKey(b)
	tok, err := Sign(k, allow(), t0.Add(5*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	defer cpuPerOp(b)()
	for b.Loop() {
		jws, err := jose.ParseSignedCompact(tok, []jose.SignatureAlgorithm{jose.EdDSA})
		if err != nil {
			b.Fatal(err)
		}
		payload, err := jws.Verify(k.Public)
		if err != nil {
			b.Fatal(err)
		}
		var w wireClaims
		if err := json.Unmarshal(payload, &w); err != nil {
			b.Fatal(err)
		}
	}
}

package signedreceipt

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
)

// payloadOf is the claims [Sign] writes for r.
func payloadOf(t testing.TB, r *admissionv1.Receipt) []byte {
	t.Helper()
	tok, err := Sign(newKey(t), r, t0.Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	jws, ok := splitCompact(tok)
	if !ok {
		t.Fatal("Sign wrote a token splitCompact refuses")
	}
	return jws.payload
}

// What Sign writes is decoded in one pass, to what encoding/json makes of
// it: the other path is for receipts no admission writes.
func TestSignedClaimsTakeTheOnePassDecode(t *testing.T) {
	full := allow()
	full.AudienceClass, full.RunId, full.Replica, full.Confirmer, full.ShownDigest = "t.readers", "run-1", "adm-2", "alice", "sha256:"+strings.Repeat("c", 64)
	full.EffectClass, full.Generation, full.PolicyEpoch = catalogv1.EffectClass(3), 1<<40, 1<<33
	for name, r := range map[string]*admissionv1.Receipt{"plain": allow(), "every claim": full} {
		payload := payloadOf(t, r)
		got, ok := decodeClaims(payload)
		if !ok {
			t.Fatalf("%s: Sign's claims fell back to encoding/json: %s", name, payload)
		}
		var want wireClaims
		if err := json.Unmarshal(payload, &want); err != nil || got != want || !strictMembers(payload) {
			t.Fatalf("%s: decoded %+v, encoding/json %+v (%v)", name, got, want, err)
		}
	}
}

// FuzzDecodeClaims: whatever the one-pass decode accepts, encoding/json
// decodes to the same claims and strictMembers accepts; anything else it
// leaves to them.
func FuzzDecodeClaims(f *testing.F) {
	f.Add(string(payloadOf(f, allow())))
	for _, s := range []string{`{}`, `{"jti":"a",}`, `{"jti":"a" }`, `{ "jti":"a"}`, `{"jti":"a","jti":"b"}`,
		`{"Jti":"a"}`, `{"jti":null}`, `{"jti":"\u0041"}`, `{"jti":"é"}`, `{"jti":"a\tb"}`, `{"gen":-0}`, `{"gen":01}`,
		`{"gen":1.0}`, `{"gen":1e3}`, `{"gen":"1"}`, `{"gen":-1}`, `{"decision":2147483647}`, `{"decision":2147483648}`,
		`{"decision":-2147483648}`, `{"exp":9223372036854775807}`, `{"exp":9223372036854775808}`, `{"exp":-9223372036854775808}`,
		`{"other":1}`, `{"jti":"a"}x`, `{"jti":"a"}}`, `{"gen":}`, `{"gen":-}`, `{"jti":"a","gen":2,"exp":3}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := decodeClaims([]byte(s))
		if !ok {
			return
		}
		var want wireClaims
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			t.Fatalf("decoded %q, which encoding/json refuses: %v", s, err)
		}
		if got != want {
			t.Fatalf("%q: decoded %+v, encoding/json %+v", s, got, want)
		}
		if !strictMembers([]byte(s)) {
			t.Fatalf("decoded %q, which strictMembers refuses", s)
		}
	})
}

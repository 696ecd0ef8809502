package signedreceipt

import (
	"bytes"
	"crypto"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/toolcrib/toolcrib/platform/keyring"
)

// signRaw signs header and payload with k as they are: a token admission's
// key really signed, so only Parse's own rules can refuse it.
func signRaw(t testing.TB, k keyring.Key, header, payload string) string {
	t.Helper()
	tok, err := keyring.SignCompact(k.Signer, []byte(header), []byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// genuine returns a receipt k signed, its header and its payload.
func genuine(t testing.TB, k keyring.Key) (tok, header, payload string) {
	t.Helper()
	tok, err := Sign(k, allow(), t0.Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(tok, ".")
	h, _ := base64.RawURLEncoding.DecodeString(parts[0])
	p, _ := base64.RawURLEncoding.DecodeString(parts[1])
	return tok, string(h), string(p)
}

func TestParseAcceptsOnlyTheHeaderSignWrites(t *testing.T) {
	k := newKey(t)
	tok, header, payload := genuine(t, k)
	if want := `{"alg":"EdDSA","kid":"` + k.ID + `","typ":"receipt+jwt"}`; header != want {
		t.Fatalf("Sign wrote the header %s, want %s", header, want)
	}
	if _, err := Parse(tok, keySet(k)); err != nil {
		t.Fatalf("the genuine receipt: %v", err)
	}
	// Each header below is signed with admission's own key: only the
	// header rule can refuse it.
	for name, h := range map[string]string{
		"alg none":                   `{"alg":"none","kid":"` + k.ID + `","typ":"receipt+jwt"}`,
		"alg HS256":                  `{"alg":"HS256","kid":"` + k.ID + `","typ":"receipt+jwt"}`,
		"alg lower case":             `{"alg":"eddsa","kid":"` + k.ID + `","typ":"receipt+jwt"}`,
		"typ of a lease":             `{"alg":"EdDSA","kid":"` + k.ID + `","typ":"lease+jwt"}`,
		"no typ":                     `{"alg":"EdDSA","kid":"` + k.ID + `"}`,
		"no kid":                     `{"alg":"EdDSA","typ":"receipt+jwt"}`,
		"empty kid":                  `{"alg":"EdDSA","kid":"","typ":"receipt+jwt"}`,
		"crit":                       `{"alg":"EdDSA","kid":"` + k.ID + `","typ":"receipt+jwt","crit":["b64"],"b64":false}`,
		"embedded jwk":               `{"alg":"EdDSA","kid":"` + k.ID + `","typ":"receipt+jwt","jwk":{"kty":"OKP","crv":"Ed25519","x":"AA"}}`,
		"members in another order":   `{"kid":"` + k.ID + `","alg":"EdDSA","typ":"receipt+jwt"}`,
		"whitespace":                 `{"alg": "EdDSA","kid":"` + k.ID + `","typ":"receipt+jwt"}`,
		"duplicate alg":              `{"alg":"none","alg":"EdDSA","kid":"` + k.ID + `","typ":"receipt+jwt"}`,
		"duplicate kid in the value": `{"alg":"EdDSA","kid":"x","kid":"` + k.ID + `","typ":"receipt+jwt"}`,
		"escaped kid":                `{"alg":"EdDSA","kid":"` + fmt.Sprintf(`\u%04x`, k.ID[0]) + k.ID[1:] + `","typ":"receipt+jwt"}`,
		"kid with a space":           `{"alg":"EdDSA","kid":"` + k.ID + ` ","typ":"receipt+jwt"}`,
		"trailing bytes":             `{"alg":"EdDSA","kid":"` + k.ID + `","typ":"receipt+jwt"} `,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Parse(signRaw(t, k, h, payload), keySet(k)); !errors.Is(err, ErrBadSignature) {
				t.Fatalf("Parse = %v, want %v", err, ErrBadSignature)
			}
		})
	}
}

func TestParseRefusesAnHS256TokenKeyedWithThePublicKey(t *testing.T) {
	// The algorithm-confusion attack: an HMAC keyed with the published
	// Ed25519 public key.
	k := newKey(t)
	_, _, payload := genuine(t, k)
	input := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","kid":"`+k.ID+`","typ":"receipt+jwt"}`)) + "." +
		base64.RawURLEncoding.EncodeToString([]byte(payload))
	mac := hmac.New(sha256.New, k.Public)
	mac.Write([]byte(input))
	for _, sig := range [][]byte{mac.Sum(nil), append(mac.Sum(nil), mac.Sum(nil)...)} {
		tok := input + "." + base64.RawURLEncoding.EncodeToString(sig)
		if _, err := Parse(tok, keySet(k)); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("an HS256 token of %d signature bytes = %v", len(sig), err)
		}
	}
}

func TestParseRefusesClaimsThatReadTwoWays(t *testing.T) {
	k := newKey(t)
	header := `{"alg":"EdDSA","kid":"` + k.ID + `","typ":"receipt+jwt"}`
	_, _, payload := genuine(t, k)
	body := strings.TrimSuffix(strings.TrimPrefix(payload, "{"), "}")
	for name, c := range map[string]struct {
		payload string
		ok      bool
	}{
		"as signed":                    {payload, true},
		"a claim admission may add":    {`{"future":1,` + body + `}`, true},
		"whitespace between members":   {"{ " + strings.ReplaceAll(body, `,"`, `, "`) + " }", true},
		"duplicate sub, last wins":     {`{` + body + `,"sub":"mallory"}`, false},
		"duplicate sub, first":         {`{"sub":"mallory",` + body + `}`, false},
		"duplicate tenant":             {`{` + body + `,"tenant":"globex"}`, false},
		"duplicate unknown member":     {`{"future":1,"future":2,` + body + `}`, false},
		"sub in upper case":            {`{` + body + `,"SUB":"mallory"}`, false},
		"sub with a long s (U+017F)":   {`{` + body + `,"ſub":"mallory"}`, false},
		"escaped member name":          {`{` + strings.Replace(body, `"sub"`, `"s\u0075b"`, 1) + `}`, false},
		"escaped unknown member":       {`{"fut\u0075re":1,` + body + `}`, false},
		"not an object":                {`[` + body + `]`, false},
		"trailing value":               {payload + `{}`, false},
		"nested duplicate is not ours": {`{"future":{"a":1,"a":2},` + body + `}`, true},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(signRaw(t, k, header, c.payload), keySet(k))
			if c.ok && err != nil {
				t.Fatalf("Parse = %v, want it accepted", err)
			}
			if !c.ok && !errors.Is(err, ErrBadSignature) {
				t.Fatalf("Parse = %v, want %v", err, ErrBadSignature)
			}
		})
	}
}

func TestParseRefusesNonCanonicalEncodings(t *testing.T) {
	k := newKey(t)
	tok, _, _ := genuine(t, k)
	parts := strings.Split(tok, ".")
	// The last character of an 86-character signature carries 2 stray bits:
	// flipping them decodes to the same bytes in a lax decoder.
	sig := []byte(parts[2])
	last := strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", sig[len(sig)-1])
	sig[len(sig)-1] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[last^1]
	for name, bad := range map[string]string{
		"stray bits in the signature": parts[0] + "." + parts[1] + "." + string(sig),
		"padding":                     parts[0] + "." + parts[1] + "." + parts[2] + "==",
		"a line break":                parts[0] + "." + parts[1][:10] + "\n" + parts[1][10:] + "." + parts[2],
		"four parts":                  tok + ".",
		"two parts":                   parts[0] + "." + parts[1],
		"empty payload":               parts[0] + ".." + parts[2],
		"short signature":             parts[0] + "." + parts[1] + "." + parts[2][:len(parts[2])-4],
		"JSON serialization":          `{"protected":"` + parts[0] + `","payload":"` + parts[1] + `","signature":"` + parts[2] + `"}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Parse(bad, keySet(k)); !errors.Is(err, ErrBadSignature) {
				t.Fatalf("Parse = %v, want %v", err, ErrBadSignature)
			}
		})
	}
}

// TestParseRefusesALineBreakEvenWhenSigned: the base64 decoder skips CR
// and LF, so a signer that signed a segment with a line break in it would
// otherwise have its token accepted in a second spelling.
func TestParseRefusesALineBreakEvenWhenSigned(t *testing.T) {
	k := newKey(t)
	tok, _, _ := genuine(t, k)
	parts := strings.Split(tok, ".")
	for _, brk := range []string{"\n", "\r", "\r\n"} {
		input := parts[0] + "." + parts[1][:10] + brk + parts[1][10:]
		sig, err := k.Signer.Sign(nil, []byte(input), crypto.Hash(0))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(input+"."+base64.RawURLEncoding.EncodeToString(sig), keySet(k)); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("a signed token with %q in its payload = %v", brk, err)
		}
	}
}

func TestParseBoundsItsInput(t *testing.T) {
	k := newKey(t)
	_, header, _ := genuine(t, k)
	// A genuinely signed receipt just over the bound is refused unread; one
	// just under it is read.
	pad := func(n int) string {
		return `{"pad":"` + strings.Repeat("x", n) + `","jti":"r-1","sub":"alice","tenant":"acme","decision":1,"exp":1}`
	}
	under := signRaw(t, k, header, pad(5000))
	if len(under) > MaxTokenBytes {
		t.Fatalf("the small receipt is %d bytes", len(under))
	}
	if _, err := Parse(under, keySet(k)); err != nil {
		t.Fatalf("a receipt of %d bytes: %v", len(under), err)
	}
	over := signRaw(t, k, header, pad(MaxTokenBytes))
	if _, err := Parse(over, keySet(k)); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("a receipt of %d bytes = %v", len(over), err)
	}
	for name, s := range map[string]string{
		"a megabyte of dots": strings.Repeat(".", 1<<20),
		"a long kid":         signRaw(t, k, `{"alg":"EdDSA","kid":"`+strings.Repeat("k", maxKeyIDBytes+1)+`","typ":"receipt+jwt"}`, `{}`),
	} {
		if _, err := Parse(s, keySet(k)); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("%s = %v", name, err)
		}
	}
}

func TestSignRefusesAKeyIDTheHeaderCannotCarry(t *testing.T) {
	k := newKey(t)
	for _, id := range []string{"", `a"b`, `a\b`, "a b", "ключ", strings.Repeat("k", maxKeyIDBytes+1)} {
		if _, err := Sign(keyring.Key{ID: id, Public: k.Public, Signer: k.Signer}, allow(), t0.Add(time.Second)); err == nil {
			t.Fatalf("Sign with the key id %q succeeded", id)
		}
	}
}

// FuzzParse feeds arbitrary tokens to Parse: it never panics, and accepts
// nothing go-jose would refuse (the parser it replaced, with the EdDSA
// allow-list) or read as other claims.
func FuzzParse(f *testing.F) {
	k := newKey(f)
	tok, header, payload := genuine(f, k)
	parts := strings.Split(tok, ".")
	f.Add(tok)
	f.Add(tok[:len(tok)-2])
	f.Add(tok + ".")
	f.Add(parts[0] + "." + parts[1] + "x." + parts[2])
	f.Add(signRaw(f, k, header, `{"sub":"a","sub":"b"}`))
	f.Add(signRaw(f, k, header, `{"future":[1,{"a":"}"}],`+payload[1:]))
	f.Add(signRaw(f, k, `{"alg":"EdDSA","kid":"`+k.ID+`","typ":"receipt+jwt","crit":["exp"]}`, payload))
	ks := keySet(k)
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s, ks)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("a refusal that is not ErrInvalid: %v", err)
			}
			return
		}
		jws, jerr := jose.ParseSignedCompact(s, []jose.SignatureAlgorithm{jose.EdDSA})
		if jerr != nil {
			t.Fatalf("accepted what go-jose cannot parse: %v", jerr)
		}
		got, jerr := jws.Verify(k.Public)
		if jerr != nil {
			t.Fatalf("accepted what go-jose does not verify: %v", jerr)
		}
		var w wireClaims
		if err := json.Unmarshal(got, &w); err != nil || w.ID != d.Receipt.GetReceiptId() || w.Subject != d.Receipt.GetSubject() || w.Tenant != d.Receipt.GetTenantId() {
			t.Fatalf("go-jose reads other claims: %v %+v", err, w)
		}
	})
}

// FuzzParseClaims signs arbitrary claim bytes with admission's key and
// checks Parse's member rule against an independent reading with
// encoding/json's tokenizer: whatever Parse accepts is one JSON object
// naming each member once, no name folding onto a claim it does not spell.
func FuzzParseClaims(f *testing.F) {
	k := newKey(f)
	_, header, payload := genuine(f, k)
	f.Add([]byte(payload))
	f.Add([]byte(`{"jti":"r","sub":"a","tenant":"t","exp":1,"sub":"b"}`))
	f.Add([]byte(`{"jti":"r","sub":"a","tenant":"t","exp":1,"Sub":"b"}`))
	f.Add([]byte(`{"jti":"r","sub":"a","tenant":"t","exp":1,"x":{"sub":1,"sub":2}}`))
	f.Add([]byte(`{"jti":"r","sub":"a","tenant":"t","exp":1,"x":"\"}"}`))
	ks := keySet(k)
	f.Fuzz(func(t *testing.T, claims []byte) {
		if len(claims) > 4096 {
			return
		}
		if _, err := Parse(signRaw(t, k, header, string(claims)), ks); err != nil {
			return
		}
		names, ok := topLevelNames(claims)
		if !ok {
			t.Fatalf("accepted claims that are not one JSON object: %q", claims)
		}
		seen := map[string]bool{}
		for _, n := range names {
			if seen[n] {
				t.Fatalf("accepted a member named twice (%q): %q", n, claims)
			}
			seen[n] = true
			for _, c := range claimNames {
				if n != c && strings.EqualFold(n, c) {
					t.Fatalf("accepted %q, which encoding/json reads as %q: %q", n, c, claims)
				}
			}
		}
	})
}

// topLevelNames reads the member names of a JSON object with encoding/json's
// tokenizer.
func topLevelNames(b []byte) ([]string, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var names []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		name, ok := tok.(string)
		if !ok {
			return nil, false
		}
		names = append(names, name)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err == nil {
		return nil, false
	}
	return names, true
}

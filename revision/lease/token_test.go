package lease

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func newSigningKey(t *testing.T, id string) (SigningKey, ed25519.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return SigningKey{ID: id, Signer: priv}, pub
}

func newHolder(t *testing.T) (ed25519.PrivateKey, HolderKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return priv, HolderKey{Public: pub, Thumbprint: Thumbprint(pub)}
}

func sampleClaims(holder HolderKey) Claims {
	return Claims{
		ID: "lease-1", Issuer: "toolcrib-lease", Subject: "alice", Tenant: "acme", Tool: "inventory.reserve",
		Server: "inventory", AudienceClass: "acme.readers",
		DescriptorDigest: "sha256:" + strings.Repeat("a", 64), Generation: 7, PolicyEpoch: 3,
		ArgumentDigest: "sha256:" + strings.Repeat("b", 64), Audience: "executor.inventory",
		HolderThumbprint: holder.Thumbprint, Receipt: "rcpt-1",
		IssuedAt: t0, ExpiresAt: t0.Add(30 * time.Second),
	}
}

// RFC 8037 appendix A.1 and A.3: the Ed25519 example key and its RFC 7638
// thumbprint.
func TestThumbprintIsRFC7638(t *testing.T) {
	jwk := []byte(`{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}`)
	k, err := ParseHolderKey(jwk)
	if err != nil {
		t.Fatal(err)
	}
	if want := "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"; k.Thumbprint != want {
		t.Fatalf("thumbprint %s, want %s", k.Thumbprint, want)
	}
	// The published JWK round-trips to the same thumbprint.
	again, err := ParseHolderKey(PublicJWK(k.Public))
	if err != nil || again.Thumbprint != k.Thumbprint {
		t.Fatalf("PublicJWK round trip: %v %s", err, again.Thumbprint)
	}
}

func TestParseHolderKeyRefusesAllButEd25519PublicJWK(t *testing.T) {
	x := "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
	cases := map[string]string{
		"private key":   `{"kty":"OKP","crv":"Ed25519","x":"` + x + `","d":"nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"}`,
		"X25519":        `{"kty":"OKP","crv":"X25519","x":"` + x + `"}`,
		"EC P-256":      `{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}`,
		"RSA":           `{"kty":"RSA","n":"sXch","e":"AQAB"}`,
		"symmetric":     `{"kty":"oct","k":"c2VjcmV0"}`,
		"short x":       `{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg"}`,
		"x not base64":  `{"kty":"OKP","crv":"Ed25519","x":"***"}`,
		"no x":          `{"kty":"OKP","crv":"Ed25519"}`,
		"alg RS256":     `{"kty":"OKP","crv":"Ed25519","alg":"RS256","x":"` + x + `"}`,
		"kty not str":   `{"kty":1,"crv":"Ed25519","x":"` + x + `"}`,
		"not an object": `["OKP"]`,
		"not JSON":      `kty=OKP`,
		"empty":         ``,
		"a megabyte":    `{"kty":"OKP","crv":"Ed25519","x":"` + x + `","pad":"` + strings.Repeat("a", 1<<20) + `"}`,
	}
	for name, jwk := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseHolderKey([]byte(jwk))
			if !errors.Is(err, ErrHolderKey) {
				t.Fatalf("ParseHolderKey = %v, want ErrHolderKey", err)
			}
			if len(err.Error()) > 300 {
				t.Fatalf("error echoes the input: %d bytes", len(err.Error()))
			}
		})
	}
}

func TestSignRefusesClaimsAVerifierWouldRefuse(t *testing.T) {
	key, _ := newSigningKey(t, "k1")
	_, holder := newHolder(t)
	cases := map[string]func(*Claims){
		"lifetime over 60s": func(c *Claims) { c.ExpiresAt = c.IssuedAt.Add(61 * time.Second) },
		"exp before iat":    func(c *Claims) { c.ExpiresAt = c.IssuedAt.Add(-time.Second) },
		"no jti":            func(c *Claims) { c.ID = "" },
		"no subject":        func(c *Claims) { c.Subject = "" },
		"no tool":           func(c *Claims) { c.Tool = "" },
		"no server":         func(c *Claims) { c.Server = "" },
		"no digest":         func(c *Claims) { c.DescriptorDigest = "" },
		"generation 0":      func(c *Claims) { c.Generation = 0 },
		"no argument":       func(c *Claims) { c.ArgumentDigest = "" },
		"no audience":       func(c *Claims) { c.Audience = "" },
		"no cnf.jkt":        func(c *Claims) { c.HolderThumbprint = "" },
	}
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			c := sampleClaims(holder)
			edit(&c)
			if tok, err := Sign(key, c); err == nil {
				t.Fatalf("Sign accepted %s: %s", name, tok)
			}
		})
	}
	c := sampleClaims(holder)
	c.ExpiresAt = c.IssuedAt.Add(MaxTTL)
	if _, err := Sign(key, c); err != nil {
		t.Fatalf("a lifetime of exactly MaxTTL is allowed: %v", err)
	}
	if _, err := Sign(SigningKey{ID: "", Signer: key.Signer}, c); err == nil {
		t.Fatal("Sign accepted a key without an id")
	}
}

func TestSignedLeaseCarriesEveryClaim(t *testing.T) {
	key, pub := newSigningKey(t, "k1")
	_, holder := newHolder(t)
	want := sampleClaims(holder)
	tok, err := Sign(key, want)
	if err != nil {
		t.Fatal(err)
	}
	got, r := parseToken(tok, NewKeySet(map[string]ed25519.PublicKey{"k1": pub}), nil)
	if r != nil {
		t.Fatal(r)
	}
	if got != want {
		t.Fatalf("claims\n got %+v\nwant %+v", got, want)
	}
	// The wire form uses the registered names and cnf.jkt.
	payload, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[1])
	var raw map[string]any
	if err := json.Unmarshal(payload, &raw); err != nil {
		t.Fatal(err)
	}
	if raw["jti"] != "lease-1" || raw["sub"] != "alice" || raw["aud"] != "executor.inventory" ||
		raw["cnf"].(map[string]any)["jkt"] != holder.Thumbprint || raw["exp"].(float64) != float64(t0.Unix()+30) {
		t.Fatalf("wire claims %v", raw)
	}
	header, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[0])
	var h map[string]any
	_ = json.Unmarshal(header, &h)
	if h["alg"] != "EdDSA" || h["typ"] != TokenType || h["kid"] != "k1" || h["jwk"] != nil {
		t.Fatalf("header %v", h)
	}
}

func TestParseTokenRefusesForgeries(t *testing.T) {
	key, pub := newSigningKey(t, "k1")
	other, _ := newSigningKey(t, "k1") // another key claiming the same id
	_, holder := newHolder(t)
	keys := NewKeySet(map[string]ed25519.PublicKey{"k1": pub})
	good, err := Sign(key, sampleClaims(holder))
	if err != nil {
		t.Fatal(err)
	}
	byOther, _ := Sign(other, sampleClaims(holder))
	unknown, _ := Sign(SigningKey{ID: "k9", Signer: key.Signer}, sampleClaims(holder))
	parts := strings.Split(good, ".")
	// A payload changed after signing (another tool).
	c := sampleClaims(holder)
	c.Tool = "inventory.delete_all"
	w, _ := json.Marshal(c.wire())
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(w) + "." + parts[2]
	hs, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte(pub)},
		(&jose.SignerOptions{}).WithType(TokenType).WithHeader("kid", "k1"))
	hsJWS, _ := hs.Sign(w)
	hmacTok, _ := hsJWS.CompactSerialize()
	noneTok := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"lease+jwt","kid":"k1"}`)) + "." + parts[1] + "."
	wrongTyp, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: key.Signer},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	wrongTypJWS, _ := wrongTyp.Sign(w)
	wrongTypTok, _ := wrongTypJWS.CompactSerialize()
	embedded, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: other.Signer},
		&jose.SignerOptions{EmbedJWK: true, ExtraHeaders: map[jose.HeaderKey]any{jose.HeaderType: TokenType}})
	embeddedJWS, _ := embedded.Sign(w)
	embeddedTok, _ := embeddedJWS.CompactSerialize()

	cases := []struct {
		name  string
		token string
		want  Failure
	}{
		{"empty", "", BadSignature},
		{"garbage", "not.a.jws", BadSignature},
		{"a megabyte", strings.Repeat("a", 1<<20), BadSignature},
		{"signature by another key with the same kid", byOther, BadSignature},
		{"kid not published", unknown, UnknownKey},
		{"payload changed after signing", tampered, BadSignature},
		{"HS256 with the public key as secret", hmacTok, BadSignature},
		{"alg none", noneTok, BadSignature},
		{"typ JWT, not a lease", wrongTypTok, BadSignature},
		{"key embedded instead of kid", embeddedTok, BadSignature},
	}
	// Each forgery is refused with nothing remembered, and again once the
	// genuine lease's header is (the forgeries that keep it take the
	// cached path).
	warm := &HeaderCache{}
	if _, r := parseToken(good, keys, warm); r != nil {
		t.Fatalf("the genuine lease was refused: %v", r)
	}
	if warm.tokens.Len() != 1 {
		t.Fatalf("%d headers remembered, want 1", warm.tokens.Len())
	}
	for _, cache := range []*HeaderCache{nil, warm} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/cached=%v", tc.name, cache != nil), func(t *testing.T) {
				_, r := parseToken(tc.token, keys, cache)
				if r == nil || r.Failure != tc.want {
					t.Fatalf("parseToken = %v, want %s", r, tc.want)
				}
				if len(r.Detail) > 200 {
					t.Fatalf("detail echoes input: %d bytes", len(r.Detail))
				}
			})
		}
		if _, r := parseToken(good, keys, cache); r != nil {
			t.Fatalf("the genuine lease was refused: %v", r)
		}
	}
}

func TestParseKeySet(t *testing.T) {
	_, pub := newSigningKey(t, "a")
	_, pub2 := newSigningKey(t, "b")
	doc, err := MarshalJWKS(map[string]ed25519.PublicKey{"b": pub2, "a": pub})
	if err != nil {
		t.Fatal(err)
	}
	ks, err := ParseKeySet(doc)
	if err != nil || ks.Len() != 2 {
		t.Fatalf("ParseKeySet = %v, %d keys", err, ks.Len())
	}
	if k, ok := ks.Key("b"); !ok || !k.Equal(pub2) {
		t.Fatal("key b is not pub2")
	}
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	privDoc, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: priv, KeyID: "p"}}})
	bad := map[string][]byte{
		"private key":  privDoc,
		"no kid":       []byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`),
		"duplicate id": []byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"a","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"},{"kty":"OKP","crv":"Ed25519","kid":"a","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`),
		"RSA":          []byte(`{"keys":[{"kty":"RSA","kid":"r","n":"sXch","e":"AQAB"}]}`),
		"not JSON":     []byte(`keys`),
	}
	for name, doc := range bad {
		if _, err := ParseKeySet(doc); err == nil {
			t.Errorf("%s: ParseKeySet accepted it", name)
		}
	}
}

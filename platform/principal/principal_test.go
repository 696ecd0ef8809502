package principal

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/toolcrib/toolcrib/platform/apierror"
)

func newPair(t *testing.T) (*Signer, *Verifier) {
	t.Helper()
	key, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner(key, "issuer-a", "toolcrib")
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := s.PublicJWKS()
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVerifier(VerifierConfig{JWKS: jwks, Issuer: "issuer-a", Audience: "toolcrib",
		PlatformTenant: "platform", AdminGroup: "admins", ServiceGroup: "services", ConfirmerGroup: "confirmers"})
	if err != nil {
		t.Fatal(err)
	}
	return s, v
}

func TestVerifyAcceptsAndMapsClaims(t *testing.T) {
	s, v := newPair(t)
	tok, err := s.Mint(Claims{Subject: "alice", Tenant: "platform", Groups: []string{"admins", "readers"}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := v.Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	if p.Subject != "alice" || p.Tenant != "platform" || !p.Admin || p.Service || !p.InGroup("readers") {
		t.Fatalf("principal %+v", p)
	}
}

// Admin and service roles count only for principals of the platform
// tenant: the same group names in any other tenant, or with no tenant
// claim, give no role.
func TestRolesCountOnlyInThePlatformTenant(t *testing.T) {
	s, v := newPair(t)
	for _, tc := range []struct {
		tenant                    string
		groups                    []string
		admin, service, confirmer bool
	}{
		{"platform", []string{"admins"}, true, false, false},
		{"platform", []string{"services"}, false, true, false},
		{"platform", []string{"confirmers"}, false, false, true},
		{"platform", []string{"readers"}, false, false, false},
		{"tenant-a", []string{"admins", "services", "confirmers"}, false, false, false},
		{"", []string{"admins", "services", "confirmers"}, false, false, false},
		{"platform-x", []string{"admins", "services", "confirmers"}, false, false, false},
	} {
		tok, err := s.Mint(Claims{Subject: "x", Tenant: tc.tenant, Groups: tc.groups})
		if err != nil {
			t.Fatal(err)
		}
		p, err := v.Verify(tok)
		if err != nil {
			t.Fatal(err)
		}
		if p.Admin != tc.admin || p.Service != tc.service || p.Confirmer != tc.confirmer {
			t.Errorf("tenant %q groups %v: admin %v service %v confirmer %v, want %v %v %v", tc.tenant, tc.groups,
				p.Admin, p.Service, p.Confirmer, tc.admin, tc.service, tc.confirmer)
		}
	}
	key, _ := GenerateKey()
	jwks, _ := (&Signer{key: key}).PublicJWKS()
	if _, err := NewVerifier(VerifierConfig{JWKS: jwks, Audience: "toolcrib", AdminGroup: "admins"}); err == nil {
		t.Fatal("a verifier with an admin group and no platform tenant was built")
	}
	if _, err := NewVerifier(VerifierConfig{JWKS: jwks, Audience: "toolcrib", ConfirmerGroup: "confirmers"}); err == nil {
		t.Fatal("a verifier with a confirmer group and no platform tenant was built")
	}
}

// An owner names its tenant: the same group or subject in another tenant
// owns nothing, and a bare group or subject (the old form) names nobody.
func TestOwnsBindsTheTenant(t *testing.T) {
	a := Principal{Subject: "alice", Tenant: "tenant-a", Groups: []string{"inventory-team"}}
	b := Principal{Subject: "alice", Tenant: "tenant-b", Groups: []string{"inventory-team"}}
	noTenant := Principal{Subject: "alice", Groups: []string{"inventory-team"}}
	for owner, want := range map[string]bool{
		"tenant-a/group:inventory-team": true,
		"tenant-a/user:alice":           true,
		"tenant-a/group:writers":        false,
		"tenant-a/user:bob":             false,
		"group:inventory-team":          false,
		"alice":                         false,
		"":                              false,
	} {
		if got := a.Owns(owner); got != want {
			t.Errorf("tenant-a Owns(%q) = %v, want %v", owner, got, want)
		}
		if b.Owns(owner) || noTenant.Owns(owner) {
			t.Errorf("a principal of another tenant (or none) owns %q", owner)
		}
	}
}

func TestParseOwner(t *testing.T) {
	for in, want := range map[string]Owner{
		"tenant-a/group:inventory-team": {Tenant: "tenant-a", Group: "inventory-team"},
		"tenant-a/user:alice@example":   {Tenant: "tenant-a", Subject: "alice@example"},
		"t/user:auth0|a/b:c":            {Tenant: "t", Subject: "auth0|a/b:c"},
	} {
		got, err := ParseOwner(in)
		if err != nil || got != want || got.String() != in {
			t.Errorf("ParseOwner(%q) = %+v, %v (String %q)", in, got, err, got.String())
		}
	}
	for _, in := range []string{"", "group:x", "alice", "Tenant-A/group:x", "tenant-a/x", "tenant-a/group:", "tenant-a/user:",
		"tenant-a/group:a b", "tenant-a/user:a\x1b[31m", "/group:x", "tenant-a/group:" + strings.Repeat("x", MaxOwnerName+1)} {
		_, err := ParseOwner(in)
		var oe *OwnerError
		if !errors.As(err, &oe) {
			t.Errorf("ParseOwner(%q) = %v, want an OwnerError", in, err)
		} else if in != "" && strings.Contains(err.Error(), in) {
			t.Errorf("the error echoes the input: %v", err)
		}
	}
}

// A token may live at most MaxLifetime (24h by default), measured from iat,
// or from now when it carries none.
func TestMaxTokenLifetime(t *testing.T) {
	s, v := newPair(t)
	century := 100 * 365 * 24 * time.Hour
	for name, c := range map[string]Claims{
		"100 years":         {Subject: "alice", TTL: century},
		"100 years, no iat": {Subject: "alice", TTL: century, OmitIssuedAt: true},
		"25 hours":          {Subject: "alice", TTL: 25 * time.Hour},
		"25 hours, no iat":  {Subject: "alice", TTL: 25 * time.Hour, OmitIssuedAt: true},
	} {
		tok, err := s.Mint(c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(tok); !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), "exceeds the maximum") {
			t.Errorf("%s: %v, want refused for its lifetime", name, err)
		}
	}
	for name, c := range map[string]Claims{
		"24 hours":       {Subject: "alice", TTL: 24 * time.Hour},
		"1 hour, no iat": {Subject: "alice", TTL: time.Hour, OmitIssuedAt: true},
	} {
		tok, _ := s.Mint(c)
		if _, err := v.Verify(tok); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A shorter configured maximum refuses what the default accepts.
	jwks, _ := s.PublicJWKS()
	short, err := NewVerifier(VerifierConfig{JWKS: jwks, Audience: "toolcrib", MaxLifetime: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := s.Mint(Claims{Subject: "alice", TTL: time.Hour})
	if _, err := short.Verify(tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("a 1h token passed a 10m maximum: %v", err)
	}
}

func TestVerifyRefuses(t *testing.T) {
	s, v := newPair(t)
	other, _ := newPair(t)
	good, _ := s.Mint(Claims{Subject: "alice"})
	forged, _ := other.Mint(Claims{Subject: "alice"})
	wrongAud, _ := s.Mint(Claims{Subject: "alice", Audience: "elsewhere"})
	expired, _ := s.Mint(Claims{Subject: "alice", TTL: -time.Hour})
	parts := strings.Split(good, ".")
	tampered := parts[0] + "." + strings.TrimRight(parts[1], "=") + "x." + parts[2]
	noSub, err := s.Mint(Claims{Subject: ""})
	if err == nil || noSub != "" {
		t.Fatal("minted a token without a subject")
	}
	wrongIss, _ := NewSigner(s.key, "issuer-b", "toolcrib")
	otherIssuer, _ := wrongIss.Mint(Claims{Subject: "alice"})
	for name, tok := range map[string]string{
		"forged (other key)": forged,
		"wrong audience":     wrongAud,
		"expired":            expired,
		"tampered payload":   tampered,
		"other issuer":       otherIssuer,
		"garbage":            "not-a-jwt",
		"empty":              "",
	} {
		if _, err := v.Verify(tok); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("%s: err = %v, want ErrInvalidToken", name, err)
		}
	}
}

func TestVerifierRefusesPrivateKeysInJWKS(t *testing.T) {
	key, _ := GenerateKey()
	s, _ := NewSigner(key, "", "toolcrib")
	_ = s
	priv := `{"keys":[` + mustJSON(t, key) + `]}`
	if _, err := NewVerifier(VerifierConfig{JWKS: []byte(priv), Audience: "toolcrib"}); err == nil {
		t.Fatal("a JWKS with a private key was accepted")
	}
}

func mustJSON(t *testing.T, v interface{ MarshalJSON() ([]byte, error) }) string {
	b, err := v.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestInterceptor(t *testing.T) {
	s, v := newPair(t)
	tok, _ := s.Mint(Claims{Subject: "bob", Tenant: "t1"})
	icpt := v.UnaryServerInterceptor()
	handler := func(ctx context.Context, _ any) (any, error) {
		p, err := Require(ctx)
		return p, err
	}
	call := func(method string, md metadata.MD) (any, error) {
		ctx := metadata.NewIncomingContext(context.Background(), md)
		return icpt(ctx, nil, &grpc.UnaryServerInfo{FullMethod: method}, handler)
	}
	got, err := call("/toolcrib.registry.v1.RegistryService/GetServer", metadata.Pairs("authorization", "Bearer "+tok))
	if err != nil || got.(Principal).Subject != "bob" {
		t.Fatalf("valid token: %v %v", got, err)
	}
	for name, md := range map[string]metadata.MD{
		"no metadata": {},
		"not bearer":  metadata.Pairs("authorization", "Basic abc"),
		"bad token":   metadata.Pairs("authorization", "Bearer abc"),
		"two values":  metadata.Pairs("authorization", "Bearer "+tok, "authorization", "Bearer "+tok),
	} {
		_, err := call("/toolcrib.registry.v1.RegistryService/GetServer", md)
		if st := apierror.ToStatus(err); st.Code() != codes.Unauthenticated {
			t.Errorf("%s: code %v, want Unauthenticated", name, st.Code())
		}
	}
	// Health needs no token; the handler then sees no principal.
	if _, err := call("/grpc.health.v1.Health/Check", metadata.MD{}); status.Code(apierror.ToStatus(err).Err()) != codes.Unauthenticated {
		t.Fatalf("health call reached the handler with a principal: %v", err)
	}
}

func TestRequireAdmin(t *testing.T) {
	ctx := NewContext(context.Background(), Principal{Subject: "x"})
	if _, err := RequireAdmin(ctx); apierror.ToStatus(err).Code() != codes.PermissionDenied {
		t.Fatalf("non-admin: %v", err)
	}
	ctx = NewContext(context.Background(), Principal{Subject: "x", Admin: true})
	if _, err := RequireAdmin(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := RequireAdmin(context.Background()); apierror.ToStatus(err).Code() != codes.Unauthenticated {
		t.Fatalf("no principal: %v", err)
	}
}

// A remembered token is still refused once it expires, and a token that
// failed is never remembered as good.
func TestVerifiedTokensAreRememberedOnlyUntilExpiry(t *testing.T) {
	s, v := newPair(t)
	now := time.Now()
	v.SetClock(func() time.Time { return now })
	tok, _ := s.Mint(Claims{Subject: "alice", TTL: time.Minute})
	for range 3 {
		if _, err := v.Verify(tok); err != nil {
			t.Fatal(err)
		}
	}
	if v.verified.Len() != 1 {
		t.Fatalf("%d tokens remembered, want 1", v.verified.Len())
	}
	now = now.Add(2 * time.Minute) // past exp + 30s leeway
	if _, err := v.Verify(tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("an expired, remembered token verified: %v", err)
	}
	if v.verified.Len() != 0 {
		t.Fatal("the expired token is still remembered")
	}
	if _, err := v.Verify("garbage"); err == nil || v.verified.Len() != 0 {
		t.Fatal("a refused token was remembered")
	}
}

// TestVerifyRefusesAMalformedTenantClaim: a token whose signature, issuer,
// audience and lifetime verify but whose `tenant` claim is not a tenant id
// is refused at verification, as a [ClaimError] naming the claim (an
// [ErrInvalidToken]) whose message never carries the value; the
// interceptor answers it UNAUTHENTICATED INVALID_TOKEN with the claim in
// the ErrorInfo metadata. A well-formed tenant, and no tenant claim at all,
// verify as before.
func TestVerifyRefusesAMalformedTenantClaim(t *testing.T) {
	s, v := newPair(t)
	long := strings.Repeat("t", 10_000)
	for name, tenant := range map[string]string{
		"upper case":       "Tenant-A",
		"a space":          "tenant a",
		"a path":           "../tenant-a",
		"a leading dash":   "-tenant",
		"64 bytes":         strings.Repeat("a", 64),
		"ten kilobytes":    long,
		"a control char":   "tenant\x00a",
		"non-ASCII":        "ténant",
		"a class name":     "tenant-a.readers",
		"an owner":         "tenant-a/group:x",
		"a bearer payload": "tenant-a\nBearer x",
	} {
		t.Run(name, func(t *testing.T) {
			tok, err := s.Mint(Claims{Subject: "alice", Tenant: tenant})
			if err != nil {
				t.Fatal(err)
			}
			_, err = v.Verify(tok)
			var ce *ClaimError
			if !errors.Is(err, ErrInvalidToken) || !errors.As(err, &ce) || ce.Claim != "tenant" {
				t.Fatalf("Verify = %v; want a ClaimError for `tenant`", err)
			}
			if !strings.Contains(err.Error(), "`tenant` claim") || strings.Contains(err.Error(), tenant) || len(err.Error()) > 200 {
				t.Fatalf("message %q: must name the claim, stay short and never carry the value", err.Error())
			}
			ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+tok))
			_, err = v.UnaryServerInterceptor()(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/toolcrib.admission.v1.AdmissionService/ListVisibleTools"},
				func(context.Context, any) (any, error) { t.Fatal("the handler ran"); return nil, nil })
			var ae *apierror.Error
			if !errors.As(err, &ae) || ae.Code != codes.Unauthenticated || ae.Reason != ReasonInvalidToken || ae.Metadata["claim"] != "tenant" {
				t.Fatalf("interceptor = %v; want UNAUTHENTICATED %s naming the claim", err, ReasonInvalidToken)
			}
		})
	}
	for name, tenant := range map[string]string{"a tenant id": "tenant-a", "63 bytes": strings.Repeat("a", 63), "no tenant claim": ""} {
		tok, _ := s.Mint(Claims{Subject: "alice", Tenant: tenant})
		if p, err := v.Verify(tok); err != nil || p.Tenant != tenant {
			t.Errorf("%s: %+v, %v", name, p, err)
		}
	}
}

// TestAnUnknownLongKeyIDIsNotEchoed: a token naming a key id of ten
// kilobytes is refused without the id in the message (a short unknown id
// is quoted, to help an operator).
func TestAnUnknownLongKeyIDIsNotEchoed(t *testing.T) {
	_, v := newPair(t)
	enc := base64.RawURLEncoding.EncodeToString
	forge := func(kid string) string {
		return enc([]byte(`{"alg":"EdDSA","kid":"`+kid+`"}`)) + "." + enc([]byte(`{"sub":"alice"}`)) + "." + enc(make([]byte, 64))
	}
	_, err := v.Verify(forge(strings.Repeat("k", 10_000)))
	if !errors.Is(err, ErrInvalidToken) || len(err.Error()) > 200 || strings.Contains(err.Error(), "kkkk") {
		t.Fatalf("a 10 KB kid: %d bytes: %.200s", len(err.Error()), err)
	}
	if _, err := v.Verify(forge("other-key")); !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), `"other-key"`) {
		t.Fatalf("a short unknown kid: %v", err)
	}
}

// Only a token of the confirmer group of the platform tenant, sent under
// the confirmer metadata key, is a confirmer: none sent, a malformed
// header, an invalid token, a user's own token, the same group in another
// tenant, an admin and a service are not.
func TestConfirmerOnlyFromTheConfirmerRole(t *testing.T) {
	s, v := newPair(t)
	mint := func(tenant string, groups ...string) string {
		tok, err := s.Mint(Claims{Subject: "c-" + tenant, Tenant: tenant, Groups: groups})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	for _, tc := range []struct {
		name string
		md   metadata.MD
		want error
	}{
		{"none", metadata.MD{}, ErrNoConfirmer},
		{"only authorization", metadata.Pairs("authorization", "Bearer "+mint("platform", "confirmers")), ErrNoConfirmer},
		{"not bearer", metadata.Pairs(ConfirmerMetadataKey, mint("platform", "confirmers")), ErrConfirmerInvalid},
		{"two values", metadata.Pairs(ConfirmerMetadataKey, "Bearer "+mint("platform", "confirmers"), ConfirmerMetadataKey, "Bearer "+mint("platform", "confirmers")), ErrConfirmerInvalid},
		{"invalid token", metadata.Pairs(ConfirmerMetadataKey, "Bearer not-a-token"), ErrConfirmerInvalid},
		{"tenant user", metadata.Pairs(ConfirmerMetadataKey, "Bearer "+mint("tenant-a", "readers")), ErrNotConfirmer},
		{"confirmer group of another tenant", metadata.Pairs(ConfirmerMetadataKey, "Bearer "+mint("tenant-a", "confirmers")), ErrNotConfirmer},
		{"admin", metadata.Pairs(ConfirmerMetadataKey, "Bearer "+mint("platform", "admins")), ErrNotConfirmer},
		{"service", metadata.Pairs(ConfirmerMetadataKey, "Bearer "+mint("platform", "services")), ErrNotConfirmer},
		{"confirmer", metadata.Pairs(ConfirmerMetadataKey, "Bearer "+mint("platform", "confirmers")), nil},
	} {
		p, err := v.Confirmer(metadata.NewIncomingContext(context.Background(), tc.md))
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: error %v, want %v", tc.name, err, tc.want)
		}
		if tc.want == nil && (p.Subject != "c-platform" || !p.Confirmer) {
			t.Errorf("%s: principal %+v", tc.name, p)
		}
	}
}

// ConfirmerFileToken sends the file's token under the confirmer key and
// re-reads the file when it changes.
func TestConfirmerFileTokenRereadsTheFile(t *testing.T) {
	path := t.TempDir() + "/confirmer-token"
	if err := os.WriteFile(path, []byte("one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := &ConfirmerFileToken{FileToken{Path: path}}
	md, err := f.GetRequestMetadata(context.Background())
	if err != nil || md[ConfirmerMetadataKey] != "Bearer one" || len(md) != 1 {
		t.Fatalf("metadata %v, %v", md, err)
	}
	if err := os.WriteFile(path, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	if md, err = f.GetRequestMetadata(context.Background()); err != nil || md[ConfirmerMetadataKey] != "Bearer two" {
		t.Fatalf("after the change: metadata %v, %v", md, err)
	}
}

// Beside sends both tokens on one call (two PerRPCCredentials call options
// would keep only the last).
func TestBesideSendsBothTokens(t *testing.T) {
	md, err := Beside(BearerToken("user"), ConfirmerToken("confirmer")).GetRequestMetadata(context.Background())
	if err != nil || len(md) != 2 || md["authorization"] != "Bearer user" || md[ConfirmerMetadataKey] != "Bearer confirmer" {
		t.Fatalf("metadata %v, %v", md, err)
	}
}

// TestVerifiedTokenCacheIsABoundedLRU: past verifiedCacheSize tokens the
// least recently used one is forgotten, not the whole cache: a token in
// use stays remembered.
func TestVerifiedTokenCacheIsABoundedLRU(t *testing.T) {
	s, v := newPair(t)
	hot, _ := s.Mint(Claims{Subject: "hot", TTL: time.Hour})
	first, _ := s.Mint(Claims{Subject: "first", TTL: time.Hour})
	for _, tok := range []string{first, hot} {
		if _, err := v.Verify(tok); err != nil {
			t.Fatal(err)
		}
	}
	for i := range verifiedCacheSize {
		tok, err := s.Mint(Claims{Subject: fmt.Sprintf("u%d", i), TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(tok); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 0 {
			if _, err := v.Verify(hot); err != nil { // in use
				t.Fatal(err)
			}
		}
	}
	if n := v.verified.Len(); n != verifiedCacheSize {
		t.Fatalf("%d tokens remembered, want the bound %d", n, verifiedCacheSize)
	}
	if !v.verified.Contains(hot) {
		t.Fatal("the token in use was forgotten")
	}
	if v.verified.Contains(first) {
		t.Fatal("the least recently used token is still remembered past the bound")
	}
}

package principal

import (
	"context"
	"errors"
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
	v, err := NewVerifier(VerifierConfig{JWKS: jwks, Issuer: "issuer-a", Audience: "toolcrib", AdminGroup: "admins", ServiceGroup: "services"})
	if err != nil {
		t.Fatal(err)
	}
	return s, v
}

func TestVerifyAcceptsAndMapsClaims(t *testing.T) {
	s, v := newPair(t)
	tok, err := s.Mint(Claims{Subject: "alice", Tenant: "tenant-a", Groups: []string{"admins", "readers"}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := v.Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	if p.Subject != "alice" || p.Tenant != "tenant-a" || !p.Admin || p.Service || !p.InGroup("readers") {
		t.Fatalf("principal %+v", p)
	}
	if !p.Owns("alice") || !p.Owns("group:readers") || p.Owns("group:writers") || p.Owns("bob") || p.Owns("") {
		t.Fatal("Owns is wrong")
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
	if len(v.verified) != 1 {
		t.Fatalf("%d tokens remembered, want 1", len(v.verified))
	}
	now = now.Add(2 * time.Minute) // past exp + 30s leeway
	if _, err := v.Verify(tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("an expired, remembered token verified: %v", err)
	}
	if len(v.verified) != 0 {
		t.Fatal("the expired token is still remembered")
	}
	if _, err := v.Verify("garbage"); err == nil || len(v.verified) != 0 {
		t.Fatal("a refused token was remembered")
	}
}

package bearer

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolcrib/toolcrib/platform/principal"
)

// TestAMalformedTenantClaimIsA401NamingTheClaim: a signed, current token
// whose `tenant` claim is no tenant id never reaches the MCP handler: 401
// with `WWW-Authenticate: Bearer error="invalid_token"`, a description
// naming the claim (never its value) and the resource metadata; a token
// that does not verify at all gets the generic description; a request
// without a token the challenge without an error code; a good token
// reaches the handler with its principal.
func TestAMalformedTenantClaimIsA401NamingTheClaim(t *testing.T) {
	key, err := principal.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	s, err := principal.NewSigner(key, "iss", "toolcrib")
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := s.PublicJWKS()
	v, err := principal.NewVerifier(principal.VerifierConfig{JWKS: jwks, Issuer: "iss", Audience: "toolcrib"})
	if err != nil {
		t.Fatal(err)
	}
	var reached principal.Principal
	h := Require(v, "https://gw.example/.well-known/oauth-protected-resource", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached, _, _ = FromContext(r.Context())
		w.WriteHeader(http.StatusNoContent)
	}))
	call := func(token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader("{}"))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	bad := "Tenant-A" + strings.Repeat("x", 5000)
	tok, _ := s.Mint(principal.Claims{Subject: "alice", Tenant: bad})
	rec := call(tok)
	ch := rec.Header().Get("WWW-Authenticate")
	if rec.Code != http.StatusUnauthorized || !strings.HasPrefix(ch, `Bearer error="invalid_token", error_description="the token's `+"`tenant`"+` claim is not a tenant id`) ||
		!strings.Contains(ch, `resource_metadata="https://gw.example/.well-known/oauth-protected-resource"`) {
		t.Fatalf("malformed tenant: %d %q", rec.Code, ch)
	}
	if strings.Contains(ch+rec.Body.String(), "Tenant-A") || len(ch) > 400 || !strings.Contains(rec.Body.String(), "`tenant` claim") {
		t.Fatalf("the answer must name the claim and never carry its value: %q %q", ch, rec.Body.String())
	}
	if reached.Subject != "" {
		t.Fatal("the handler ran")
	}

	rec = call("not-a-jwt")
	if ch := rec.Header().Get("WWW-Authenticate"); rec.Code != http.StatusUnauthorized ||
		!strings.HasPrefix(ch, `Bearer error="invalid_token", error_description="the bearer token did not verify", resource_metadata=`) {
		t.Fatalf("garbage token: %d %q", rec.Code, ch)
	}
	rec = call("")
	if ch := rec.Header().Get("WWW-Authenticate"); rec.Code != http.StatusUnauthorized || strings.Contains(ch, "error=") || !strings.Contains(ch, "resource_metadata=") {
		t.Fatalf("no token: %d %q", rec.Code, ch)
	}
	good, _ := s.Mint(principal.Claims{Subject: "alice", Tenant: "tenant-a"})
	if rec := call(good); rec.Code != http.StatusNoContent || reached.Tenant != "tenant-a" {
		t.Fatalf("good token: %d %+v", rec.Code, reached)
	}
}

package principal

import (
	"strings"
	"testing"
)

// Only allow-listed claims with string values of at most
// MaxConditionClaimBytes reach a condition; a longer one is absent, never
// cut.
func TestConditionClaimsAllowList(t *testing.T) {
	raw := map[string]any{
		"department": "finance", "cost_center": "cc-17", "secret": "not listed",
		"level": 3.0, "long": strings.Repeat("x", MaxConditionClaimBytes+1),
	}
	got := conditionClaims(raw, []string{"department", "cost_center", "level", "long", "missing"})
	if len(got) != 2 || got["department"] != "finance" || got["cost_center"] != "cc-17" {
		t.Fatalf("got %v", got)
	}
	if conditionClaims(raw, []string{"missing"}) != nil {
		t.Fatal("no claim kept must be nil")
	}
}

// Claims.Extra reach the token and, when allow-listed, the verified
// principal's Claims; an extra claim never replaces sub, tenant or groups.
func TestMintExtraClaimsReachAllowListedConditions(t *testing.T) {
	s, _ := newPair(t)
	jwks, err := s.PublicJWKS()
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVerifier(VerifierConfig{JWKS: jwks, Issuer: "issuer-a", Audience: "toolcrib", ConditionClaims: []string{"department"}})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := s.Mint(Claims{Subject: "sam", Tenant: "tenant-a", Groups: []string{"support"},
		Extra: map[string]any{"department": "finance", "level": "7", "tenant": "platform", "sub": "root"}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := v.Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	if p.Subject != "sam" || p.Tenant != "tenant-a" || len(p.Claims) != 1 || p.Claims["department"] != "finance" {
		t.Fatalf("principal %+v", p)
	}
}

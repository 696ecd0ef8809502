package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolcrib/toolcrib/platform/principal"
)

func parseCommon(t *testing.T, vars map[string]string, args ...string) Common {
	t.Helper()
	var c Common
	s := NewSet("registry", env(vars))
	c.Register(s, "registry", Defaults{ListenAddr: "127.0.0.1:7101"})
	if err := s.Parse(args); err != nil {
		t.Fatal(err)
	}
	return c
}

// Without discovery the JWKS file is read, as before; --auth-discovery
// turns each comma-separated --auth-issuer into a platform issuer with the
// single-issuer claim flags, and --auth-jwks is no longer required.
func TestIssuersFromFlags(t *testing.T) {
	c := parseCommon(t, nil)
	if _, ok, err := c.Discovery(); ok || err != nil {
		t.Fatalf("discovery by default: %v %v", ok, err)
	}
	c = parseCommon(t, map[string]string{"TOOLCRIB_AUTH_DISCOVERY": "true", "TOOLCRIB_AUTH_ISSUER": "https://a.example, https://b.example"},
		"--auth-jwks", "", "--auth-groups-claim", "roles", "--auth-keys-max-stale", "10m")
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	d, ok, err := c.Discovery()
	if !ok || err != nil {
		t.Fatalf("discovery: %v %v", ok, err)
	}
	want := []principal.Issuer{
		{URL: "https://a.example", TenantClaim: "tenant", GroupsClaim: "roles", Platform: true},
		{URL: "https://b.example", TenantClaim: "tenant", GroupsClaim: "roles", Platform: true},
	}
	if !slices.Equal(d.Issuers, want) || d.MaxStale.Minutes() != 10 || d.Refresh != principal.DefaultKeysRefresh {
		t.Fatalf("discovery %+v", d)
	}
	// One tenant for two issuers, and plain http off loopback, are refused.
	c = parseCommon(t, nil, "--auth-discovery", "--auth-issuer", "https://a.example,http://b.example", "--auth-tenant", "acme")
	err = c.Validate()
	for _, want := range []string{"--auth-issuer: issuer 2 (http://b.example): http is allowed only on a loopback host", "tenant acme is already mapped to https://a.example"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validation error %v does not say %q", err, want)
		}
	}
	c = parseCommon(t, nil, "--auth-keys-refresh", "10m", "--auth-keys-max-stale", "5m")
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--auth-keys-max-stale: must be at least --auth-keys-refresh (10m0s)") {
		t.Errorf("a stale bound below the refresh interval: %v", err)
	}
	// A single issuer mapped to a customer tenant is not the platform's.
	c = parseCommon(t, nil, "--auth-discovery", "--auth-issuer", "https://a.example", "--auth-tenant", "acme")
	if is, _ := c.Issuers(); len(is) != 1 || is[0].Platform || is[0].Tenant != "acme" {
		t.Fatalf("issuers %+v", is)
	}
}

// The issuers file gives each issuer its own mapping; unknown fields are
// refused, and it cannot be combined with --auth-discovery.
func TestIssuersFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "issuers.json")
	if err := os.WriteFile(good, []byte(`[
  {"url": "https://login.example/ops", "platform": true},
  {"url": "https://idp.tenant-a.example", "tenant": "tenant-a"},
  {"url": "https://idp.tenant-b.example", "tenant": "tenant-b", "tenant_claim": "org", "groups_claim": "roles", "audience": "api://toolcrib"}
]`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := parseCommon(t, nil, "--auth-issuers-file", good)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	d, ok, err := c.Discovery()
	if !ok || err != nil || len(d.Issuers) != 3 || d.Issuers[2] != (principal.Issuer{URL: "https://idp.tenant-b.example", Tenant: "tenant-b", TenantClaim: "org", GroupsClaim: "roles", Audience: "api://toolcrib"}) {
		t.Fatalf("discovery %+v %v %v", d, ok, err)
	}
	typo := filepath.Join(dir, "typo.json")
	if err := os.WriteFile(typo, []byte(`[{"url": "https://a.example", "tennant": "a"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	c = parseCommon(t, nil, "--auth-issuers-file", typo, "--auth-discovery")
	err = c.Validate()
	for _, want := range []string{`--auth-issuers-file: principal: parse issuers file ` + typo + `: json: unknown field "tennant"`, "--auth-discovery: give either"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validation error %v does not say %q", err, want)
		}
	}
}

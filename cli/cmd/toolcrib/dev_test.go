package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/toolcrib/toolcrib/platform/config"
	"github.com/toolcrib/toolcrib/platform/principal"
)

// devVerifier verifies tokens as a service started by `dev up` with its
// default configuration does.
func devVerifier(t *testing.T) *principal.Verifier {
	t.Helper()
	v, err := principal.LoadVerifier(devDir+"/jwks.json", principal.VerifierConfig{Issuer: devIssuer, Audience: devAudience,
		PlatformTenant: config.DefaultPlatformTenant, AdminGroup: devAdminGroup, ServiceGroup: devServiceGroup})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func devToken(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), append([]string{"dev", "token"}, args...), &out, &errOut)
	return strings.TrimSpace(out.String()), err
}

// `dev token --admin` and `--service` mint tokens of the platform tenant,
// which the services' defaults take as an admin and a service; a tenant
// token with the same groups is neither, and asking for an admin token of
// another tenant is refused.
func TestDevTokensOfThePlatformTenant(t *testing.T) {
	t.Chdir(t.TempDir())
	admin, err := devToken(t, "--sub", "root", "--admin")
	if err != nil {
		t.Fatal(err)
	}
	service, err := devToken(t, "--sub", "svc", "--service")
	if err != nil {
		t.Fatal(err)
	}
	user, err := devToken(t, "--sub", "mallory", "--tenant", "tenant-a", "--groups", devAdminGroup+","+devServiceGroup)
	if err != nil {
		t.Fatal(err)
	}
	v := devVerifier(t)
	for name, tc := range map[string]struct {
		token          string
		admin, service bool
	}{"admin": {admin, true, false}, "service": {service, false, true}, "tenant user with the groups": {user, false, false}} {
		p, err := v.Verify(tc.token)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if p.Admin != tc.admin || p.Service != tc.service {
			t.Fatalf("%s: %+v", name, p)
		}
	}
	if _, err := devToken(t, "--admin", "--tenant", "tenant-a"); err == nil || !strings.Contains(err.Error(), "platform tenant") {
		t.Fatalf("an admin token of tenant-a: %v", err)
	}
}

// `dev token` with a 100-year --ttl mints a token the services refuse.
func TestDevTokenBeyondTheMaximumLifetimeIsRefused(t *testing.T) {
	t.Chdir(t.TempDir())
	tok, err := devToken(t, "--admin", "--ttl", "876000h")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := devVerifier(t).Verify(tok); err == nil || !strings.Contains(err.Error(), "exceeds the maximum") {
		t.Fatalf("a 100-year dev token verified: %v", err)
	}
}

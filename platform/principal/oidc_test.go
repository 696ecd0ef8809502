package principal_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/platform/oidctest"
	"github.com/toolcrib/toolcrib/platform/principal"
)

const (
	oidcAudience = "toolcrib"
	platformT    = "toolcrib-platform"
)

func oidcVerifier(t *testing.T, d principal.Discovery) *principal.Verifier {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	v, err := principal.NewOIDCVerifier(ctx, principal.VerifierConfig{
		Audience: oidcAudience, PlatformTenant: platformT, AdminGroup: "admins", ServiceGroup: "services",
	}, d)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestOIDCProviderTokenAccepted(t *testing.T) {
	op := oidctest.Start(t, oidcAudience)
	v := oidcVerifier(t, principal.Discovery{Issuers: []principal.Issuer{{URL: op.Issuer, Platform: true}}})
	if got := v.Issuers(); len(got) != 1 || got[0] != op.Issuer {
		t.Fatalf("Issuers() = %v", got)
	}
	p, err := v.Verify(op.Token(t, "alice", map[string]any{"tenant": "acme", "groups": []string{"readers"}}))
	if err != nil {
		t.Fatal(err)
	}
	if p.Subject != "alice" || p.Tenant != "acme" || !p.InGroup("readers") || p.Admin || p.Service {
		t.Fatalf("principal = %+v", p)
	}
	admin, err := v.Verify(op.Token(t, "root", map[string]any{"tenant": platformT, "groups": []string{"admins"}}))
	if err != nil || !admin.Admin {
		t.Fatalf("platform admin from the platform issuer: %+v, %v", admin, err)
	}
}

func TestOIDCClaimNamesPerIssuer(t *testing.T) {
	op := oidctest.Start(t, "other-aud")
	v := oidcVerifier(t, principal.Discovery{Issuers: []principal.Issuer{{URL: op.Issuer, TenantClaim: "org", GroupsClaim: "roles", Audience: "other-aud"}}})
	p, err := v.Verify(op.Token(t, "bob", map[string]any{"org": "acme", "roles": []string{"writers"}, "tenant": "ignored"}))
	if err != nil {
		t.Fatal(err)
	}
	if p.Tenant != "acme" || !p.InGroup("writers") {
		t.Fatalf("principal = %+v", p)
	}
	_, err = v.Verify(op.Token(t, "carol", map[string]any{"org": []string{"acme"}}))
	if !errors.Is(err, principal.ErrInvalidToken) || err.Error() != "invalid token: the tenant claim is not a string" {
		t.Fatalf("a tenant claim that is no string: %v", err)
	}
}

func TestOIDCRotationWithoutRestart(t *testing.T) {
	op := oidctest.Start(t, oidcAudience)
	// The schedule is long: only the unknown key id makes the verifier
	// fetch the new key.
	v := oidcVerifier(t, principal.Discovery{Issuers: []principal.Issuer{{URL: op.Issuer}}, Refresh: time.Hour, MinRefresh: time.Millisecond})
	old := op.Token(t, "alice", map[string]any{"tenant": "acme"})
	if _, err := v.Verify(old); err != nil {
		t.Fatal(err)
	}
	op.Rotate()
	time.Sleep(2 * time.Millisecond)
	if _, err := v.Verify(op.Token(t, "alice", map[string]any{"tenant": "acme"})); err != nil {
		t.Fatalf("a token signed by the rotated-in key: %v", err)
	}
}

func TestOIDCUnknownKeyRefreshIsRateLimited(t *testing.T) {
	op := oidctest.Start(t, oidcAudience)
	v := oidcVerifier(t, principal.Discovery{Issuers: []principal.Issuer{{URL: op.Issuer}}, Refresh: time.Hour, MinRefresh: time.Hour})
	op.Rotate()
	_, err := v.Verify(op.Token(t, "alice", map[string]any{"tenant": "acme"}))
	if !errors.Is(err, principal.ErrUnknownKeyID) {
		t.Fatalf("a new key within the rate limit: %v", err)
	}
}

func TestOIDCRemovedKeyRefused(t *testing.T) {
	op := oidctest.Start(t, oidcAudience)
	v := oidcVerifier(t, principal.Discovery{Issuers: []principal.Issuer{{URL: op.Issuer}}, Refresh: 100 * time.Millisecond, MinRefresh: time.Millisecond})
	oldKey := op.CurrentKeyID()
	old := op.Token(t, "alice", map[string]any{"tenant": "acme"})
	if _, err := v.Verify(old); err != nil {
		t.Fatal(err)
	}
	op.Rotate()
	op.RemoveKey(oldKey)
	// The token was verified (and remembered) before; once the scheduled
	// refresh drops its key it is refused all the same.
	eventually(t, "the token of the removed key is refused", func() bool {
		_, err := v.Verify(old)
		return errors.Is(err, principal.ErrUnknownKeyID)
	})
	if _, err := v.Verify(op.Token(t, "alice", map[string]any{"tenant": "acme"})); err != nil {
		t.Fatalf("a token of the current key: %v", err)
	}
}

func TestOIDCUnconfiguredIssuerRefused(t *testing.T) {
	trusted, stranger := oidctest.Start(t, oidcAudience), oidctest.Start(t, oidcAudience)
	v := oidcVerifier(t, principal.Discovery{Issuers: []principal.Issuer{{URL: trusted.Issuer, Platform: true}}})
	_, err := v.Verify(stranger.Token(t, "mallory", map[string]any{"tenant": platformT, "groups": []string{"admins"}}))
	if !errors.Is(err, principal.ErrIssuerNotConfigured) {
		t.Fatalf("a token of an unconfigured issuer: %v", err)
	}
}

func TestOIDCIssuersOfTwoTenantsNeverCross(t *testing.T) {
	a, b, shared, plat := oidctest.Start(t, oidcAudience), oidctest.Start(t, oidcAudience), oidctest.Start(t, oidcAudience), oidctest.Start(t, oidcAudience)
	v := oidcVerifier(t, principal.Discovery{Issuers: []principal.Issuer{
		{URL: a.Issuer, Tenant: "tenant-a"},
		{URL: b.Issuer, Tenant: "tenant-b"},
		{URL: shared.Issuer}, // carries the tenant in its claim
		{URL: plat.Issuer, Platform: true},
	}})
	for _, c := range []struct {
		name   string
		op     *oidctest.Provider
		claims map[string]any
		tenant string
		want   error
	}{
		{"a's token acts for tenant-a", a, map[string]any{}, "tenant-a", nil},
		{"b's token acts for tenant-b", b, map[string]any{"tenant": "tenant-b"}, "tenant-b", nil},
		{"b's token naming tenant-a", b, map[string]any{"tenant": "tenant-a"}, "", principal.ErrTenantMismatch},
		{"b's token naming the platform tenant", b, map[string]any{"tenant": platformT, "groups": []string{"admins"}}, "", principal.ErrTenantMismatch},
		{"a claim-carrying issuer naming tenant-a", shared, map[string]any{"tenant": "tenant-a"}, "", principal.ErrTenantOfOtherIssuer},
		{"a claim-carrying issuer naming the platform tenant", shared, map[string]any{"tenant": platformT, "groups": []string{"admins"}}, "", principal.ErrPlatformTenantNotTrusted},
		{"a claim-carrying issuer naming its own tenant", shared, map[string]any{"tenant": "tenant-c"}, "tenant-c", nil},
		{"the platform issuer naming tenant-b", plat, map[string]any{"tenant": "tenant-b"}, "", principal.ErrTenantOfOtherIssuer},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := v.Verify(c.op.Token(t, "user", c.claims))
			if c.want != nil {
				if !errors.Is(err, c.want) || !errors.Is(err, principal.ErrInvalidToken) {
					t.Fatalf("got %+v, %v; want %v", p, err, c.want)
				}
				return
			}
			if err != nil || p.Tenant != c.tenant || p.Admin {
				t.Fatalf("got %+v, %v; want tenant %s", p, err, c.tenant)
			}
		})
	}
}

func TestOIDCLastGoodKeysBoundedThenFailClosed(t *testing.T) {
	op := oidctest.Start(t, oidcAudience)
	const maxStale = 1500 * time.Millisecond
	v := oidcVerifier(t, principal.Discovery{Issuers: []principal.Issuer{{URL: op.Issuer}}, Refresh: 100 * time.Millisecond, MaxStale: maxStale, MinRefresh: 50 * time.Millisecond})
	tok := op.Token(t, "alice", map[string]any{"tenant": "acme"})
	fresh := op.Token(t, "bob", map[string]any{"tenant": "acme"})
	unseen := op.Token(t, "carol", map[string]any{"tenant": "acme"})
	if _, err := v.Verify(tok); err != nil {
		t.Fatal(err)
	}
	op.SetDown(true)
	down := time.Now()
	// Within the bound the last good keys still verify, remembered or not.
	time.Sleep(300 * time.Millisecond)
	if _, err := v.Verify(tok); err != nil && time.Since(down) < maxStale-200*time.Millisecond {
		t.Fatalf("a remembered token within the stale bound: %v", err)
	}
	if _, err := v.Verify(fresh); err != nil && time.Since(down) < maxStale-200*time.Millisecond {
		t.Fatalf("a new token within the stale bound: %v", err)
	}
	eventually(t, "the issuer fails closed after the stale bound", func() bool {
		_, err1 := v.Verify(tok)
		_, err2 := v.Verify(unseen)
		return errors.Is(err1, principal.ErrIssuerKeysStale) && errors.Is(err2, principal.ErrIssuerKeysStale)
	})
	if since := time.Since(down); since < maxStale-200*time.Millisecond {
		t.Fatalf("failed closed after %v, before the bound %v", since, maxStale)
	}
	op.SetDown(false)
	eventually(t, "the issuer's tokens are accepted once it answers again", func() bool {
		_, err := v.Verify(tok)
		return err == nil
	})
}

func TestOIDCIssuerUnreachableAtStart(t *testing.T) {
	op := oidctest.Start(t, oidcAudience)
	op.SetDown(true)
	_, err := principal.NewOIDCVerifier(context.Background(), principal.VerifierConfig{Audience: oidcAudience}, principal.Discovery{Issuers: []principal.Issuer{{URL: op.Issuer}}})
	if err == nil || !strings.Contains(err.Error(), "principal: no issuer could be reached") {
		t.Fatalf("a verifier of no reachable issuer: %v", err)
	}
}

// One customer's provider being down at start-up does not stop the
// service: the others' tokens are accepted, its own refused until it
// answers, then accepted without a restart.
func TestOIDCOneIssuerDownAtStart(t *testing.T) {
	up, down := oidctest.Start(t, oidcAudience), oidctest.Start(t, oidcAudience)
	early := down.Token(t, "bob", map[string]any{})
	down.SetDown(true)
	v := oidcVerifier(t, principal.Discovery{Issuers: []principal.Issuer{{URL: up.Issuer, Tenant: "tenant-a"}, {URL: down.Issuer, Tenant: "tenant-b"}}, MinRefresh: 50 * time.Millisecond})
	if p, err := v.Verify(up.Token(t, "alice", map[string]any{})); err != nil || p.Tenant != "tenant-a" {
		t.Fatalf("the reachable issuer's token: %+v, %v", p, err)
	}
	if _, err := v.Verify(early); !errors.Is(err, principal.ErrIssuerKeysStale) {
		t.Fatalf("the unreachable issuer's token: %v", err)
	}
	down.SetDown(false)
	eventually(t, "the issuer's tokens are accepted once it answers", func() bool {
		p, err := v.Verify(early)
		return err == nil && p.Tenant == "tenant-b"
	})
}

// An issuer's own audience replaces the verifier's: a token for another
// audience is refused.
func TestOIDCIssuerAudience(t *testing.T) {
	op := oidctest.Start(t, oidcAudience)
	v := oidcVerifier(t, principal.Discovery{Issuers: []principal.Issuer{{URL: op.Issuer, Audience: "api://elsewhere"}}})
	_, err := v.Verify(op.Token(t, "alice", map[string]any{}))
	if !errors.Is(err, principal.ErrInvalidToken) || !strings.Contains(err.Error(), "audience") {
		t.Fatalf("a token for another audience: %v", err)
	}
}

func TestValidateIssuers(t *testing.T) {
	for _, c := range []struct {
		name    string
		issuers []principal.Issuer
		ok      bool
	}{
		{"one https issuer", []principal.Issuer{{URL: "https://idp.example"}}, true},
		{"http on loopback", []principal.Issuer{{URL: "http://127.0.0.1:5556"}}, true},
		{"none", nil, false},
		{"http elsewhere", []principal.Issuer{{URL: "http://idp.example"}}, false},
		{"twice", []principal.Issuer{{URL: "https://idp.example"}, {URL: "https://idp.example"}}, false},
		{"one tenant, two issuers", []principal.Issuer{{URL: "https://a.example", Tenant: "t"}, {URL: "https://b.example", Tenant: "t"}}, false},
		{"platform tenant without platform", []principal.Issuer{{URL: "https://a.example", Tenant: platformT}}, false},
		{"platform tenant, platform", []principal.Issuer{{URL: "https://a.example", Tenant: platformT, Platform: true}}, true},
		{"bad tenant id", []principal.Issuer{{URL: "https://a.example", Tenant: "Not A Tenant"}}, false},
	} {
		err := principal.ValidateIssuers(c.issuers, platformT)
		if (err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

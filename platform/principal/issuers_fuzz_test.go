package principal

import (
	"errors"
	"testing"
)

// FuzzIssuerTenant feeds arbitrary token payloads to the claim rules of
// three issuers (mapped to tenant-a, claim-carrying, the platform's) and
// checks the invariants: a mapped issuer yields only its tenant; no issuer
// yields a tenant mapped to another; only the platform's issuer yields the
// platform tenant; every refusal is an invalid token.
func FuzzIssuerTenant(f *testing.F) {
	for _, seed := range []string{
		`{"tenant":"tenant-a"}`, `{"tenant":"tenant-b","groups":["x"]}`, `{"tenant":"toolcrib-platform"}`,
		`{"org":"tenant-a"}`, `{"tenant":["tenant-a"]}`, `{"groups":"admins"}`, `{}`, `null`, `{"tenant":null}`,
	} {
		f.Add([]byte(seed))
	}
	const platform = "toolcrib-platform"
	issuers := []Issuer{
		{URL: "https://a.example", Tenant: "tenant-a"},
		{URL: "https://shared.example", TenantClaim: "org"},
		{URL: "https://ops.example", Platform: true},
	}
	owners := map[string]string{"tenant-a": "https://a.example"}
	f.Fuzz(func(t *testing.T, payload []byte) {
		for _, is := range issuers {
			c, err := parseIssuerClaims(is, payload)
			if err != nil {
				if !errors.Is(err, ErrInvalidToken) {
					t.Fatalf("%s: claims error %v is no invalid token", is.URL, err)
				}
				continue
			}
			tenant, err := issuerTenant(is, c, owners, platform)
			if err != nil {
				if !errors.Is(err, ErrInvalidToken) {
					t.Fatalf("%s: tenant error %v is no invalid token", is.URL, err)
				}
				continue
			}
			if is.Tenant != "" && tenant != is.Tenant {
				t.Fatalf("%s mapped to %s yielded %q", is.URL, is.Tenant, tenant)
			}
			if owner, ok := owners[tenant]; ok && owner != is.URL {
				t.Fatalf("%s yielded %s, mapped to %s", is.URL, tenant, owner)
			}
			if tenant == platform && !is.Platform {
				t.Fatalf("%s (not the platform's) yielded the platform tenant", is.URL)
			}
		}
	})
}

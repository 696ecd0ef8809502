package servicetest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/platform/config"
	"github.com/toolcrib/toolcrib/platform/principal"
)

// OIDCKeysRefresh is how often services under an [NewOIDCAuth] fetch the
// provider's keys again, so a rotation or a removed key shows within a
// test.
const OIDCKeysRefresh = 300 * time.Millisecond

// Provider is an OpenID provider for tests (oidctest.Provider, kept
// behind this interface so that only the tests using one depend on it).
type Provider interface {
	// URL is the issuer URL.
	URL() string
	// Token issues an access token for subject carrying claims.
	Token(t testing.TB, subject string, claims map[string]any) string
}

// NewOIDCAuth returns an Auth whose tokens the OpenID provider p issues
// (its audience must be [Audience]), and whose [Auth.Common] configures the
// services to discover p (--auth-discovery, --auth-issuer p.URL()) as the
// platform's issuer, with the tenant and groups in the default claims.
// Token ignores the TTL, Audience and OmitIssuedAt of its claims: the
// provider sets those. With others, the services trust those issuers too
// (each with its own mapping), all written to an issuers file
// (--auth-issuers-file) after p's entry.
func NewOIDCAuth(t testing.TB, p Provider, others ...principal.Issuer) *Auth {
	t.Helper()
	a := NewAuth(t)
	a.Provider = p
	a.otherIssuers = others
	return a
}

func (a *Auth) providerToken(t testing.TB, c principal.Claims) string {
	t.Helper()
	claims := map[string]any{}
	for k, v := range c.Extra {
		claims[k] = v
	}
	if c.Tenant != "" {
		claims[principal.DefaultTenantClaim] = c.Tenant
	}
	if len(c.Groups) > 0 {
		claims[principal.DefaultGroupsClaim] = c.Groups
	}
	return a.Provider.Token(t, c.Subject, claims)
}

func (a *Auth) useProvider(t testing.TB, c *config.Common) {
	t.Helper()
	c.AuthJWKS = ""
	c.AuthKeysRefresh = OIDCKeysRefresh
	if len(a.otherIssuers) == 0 {
		c.AuthDiscovery = true
		c.AuthIssuer = a.Provider.URL()
		c.AuthTenantClaim, c.AuthGroupsClaim = principal.DefaultTenantClaim, principal.DefaultGroupsClaim
		return
	}
	b, err := json.Marshal(append([]principal.Issuer{{URL: a.Provider.URL(), Platform: true}}, a.otherIssuers...))
	if err != nil {
		t.Fatal(err)
	}
	c.AuthIssuersFile = filepath.Join(a.dir, "issuers.json")
	if err := os.WriteFile(c.AuthIssuersFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

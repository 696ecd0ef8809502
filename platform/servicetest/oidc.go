package servicetest

import (
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/platform/config"
	"github.com/toolcrib/toolcrib/platform/oidctest"
	"github.com/toolcrib/toolcrib/platform/principal"
)

// OIDCKeysRefresh is how often services under an [NewOIDCAuth] fetch the
// provider's keys again, so a rotation or a removed key shows within a
// test.
const OIDCKeysRefresh = 300 * time.Millisecond

// NewOIDCAuth returns an Auth whose tokens the OpenID provider p issues
// (its audience must be [Audience]), and whose [Auth.Common] configures the
// services to discover p (--auth-discovery, --auth-issuer p.Issuer) as the
// platform's issuer, with the tenant and groups in the default claims.
// Token ignores the TTL, Audience and OmitIssuedAt of its claims: the
// provider sets those.
func NewOIDCAuth(t testing.TB, p *oidctest.Provider) *Auth {
	t.Helper()
	a := NewAuth(t)
	a.Provider = p
	return a
}

func (a *Auth) providerToken(t testing.TB, c principal.Claims) string {
	t.Helper()
	claims := map[string]any{}
	if c.Tenant != "" {
		claims[principal.DefaultTenantClaim] = c.Tenant
	}
	if len(c.Groups) > 0 {
		claims[principal.DefaultGroupsClaim] = c.Groups
	}
	return a.Provider.Token(t, c.Subject, claims)
}

func (a *Auth) useProvider(c *config.Common) {
	c.AuthJWKS = ""
	c.AuthDiscovery = true
	c.AuthIssuer = a.Provider.Issuer
	c.AuthTenantClaim, c.AuthGroupsClaim = principal.DefaultTenantClaim, principal.DefaultGroupsClaim
	c.AuthKeysRefresh = OIDCKeysRefresh
}

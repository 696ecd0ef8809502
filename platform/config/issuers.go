package config

import (
	"strings"

	"github.com/toolcrib/toolcrib/platform/principal"
)

// registerIssuers adds the flags of identity from OpenID providers.
func (c *Common) registerIssuers(s *Set) {
	s.Bool(&c.AuthDiscovery, "auth-discovery", "", false, "find the keys of --auth-issuer by OpenID Connect discovery instead of reading --auth-jwks")
	s.String(&c.AuthIssuersFile, "auth-issuers-file", "", "", "JSON file of OpenID providers, one entry per issuer with its tenant mapping; implies discovery and replaces --auth-issuer, --auth-tenant, --auth-tenant-claim and --auth-groups-claim")
	s.String(&c.AuthTenant, "auth-tenant", "", "", "with --auth-discovery: the tenant of every token of --auth-issuer (a token naming another tenant is refused); empty takes it from --auth-tenant-claim")
	s.String(&c.AuthTenantClaim, "auth-tenant-claim", "", principal.DefaultTenantClaim, "with --auth-discovery: the claim carrying the tenant")
	s.String(&c.AuthGroupsClaim, "auth-groups-claim", "", principal.DefaultGroupsClaim, "with --auth-discovery: the claim carrying the groups (an array of strings)")
	s.Duration(&c.AuthKeysRefresh, "auth-keys-refresh", "", principal.DefaultKeysRefresh, "how often each issuer's keys are fetched again (also at once, at most every 10s, for an unknown key id)")
	s.Duration(&c.AuthKeysMaxStale, "auth-keys-max-stale", "", principal.DefaultKeysMaxStale, "how long an unreachable issuer's last good keys stay trusted; after it the issuer's tokens are refused until its keys are fetched again")
}

// UsesDiscovery reports whether the services find their keys at OpenID
// providers rather than in the JWKS file.
func (c *Common) UsesDiscovery() bool { return c.AuthDiscovery || c.AuthIssuersFile != "" }

// Issuers returns the configured OpenID providers: the issuers file's
// entries, or one entry per --auth-issuer URL with the single-issuer flags.
// The issuers from flags are the platform's (they are trusted for every
// tenant, as the JWKS file is); an issuers file says so per entry.
func (c *Common) Issuers() ([]principal.Issuer, error) {
	if c.AuthIssuersFile != "" {
		return principal.LoadIssuersFile(c.AuthIssuersFile)
	}
	var issuers []principal.Issuer
	for u := range strings.SplitSeq(c.AuthIssuer, ",") {
		if u = strings.TrimSpace(u); u == "" {
			continue
		}
		issuers = append(issuers, principal.Issuer{
			URL: u, Tenant: c.AuthTenant, TenantClaim: c.AuthTenantClaim, GroupsClaim: c.AuthGroupsClaim,
			Platform: c.AuthTenant == "" || c.AuthTenant == c.AuthPlatformTenant,
		})
	}
	return issuers, nil
}

// Discovery returns the verifier's discovery settings; ok is false when
// the services read the JWKS file instead.
func (c *Common) Discovery() (d principal.Discovery, ok bool, err error) {
	if !c.UsesDiscovery() {
		return principal.Discovery{}, false, nil
	}
	issuers, err := c.Issuers()
	if err != nil {
		return principal.Discovery{}, true, err
	}
	return principal.Discovery{Issuers: issuers, Refresh: c.AuthKeysRefresh, MaxStale: c.AuthKeysMaxStale}, true, nil
}

func (c *Common) validateIssuers(bad func(flagName, format string, args ...any)) {
	// 0 (a Common built in code) means the default.
	if c.AuthKeysRefresh < 0 {
		bad("auth-keys-refresh", "must be positive")
	}
	if c.AuthKeysMaxStale < 0 {
		bad("auth-keys-max-stale", "must be positive")
	}
	if c.AuthKeysRefresh > 0 && c.AuthKeysMaxStale > 0 && c.AuthKeysMaxStale < c.AuthKeysRefresh {
		bad("auth-keys-max-stale", "must be at least --auth-keys-refresh (%v)", c.AuthKeysRefresh)
	}
	if !c.UsesDiscovery() {
		return
	}
	flag := "auth-issuer"
	if c.AuthIssuersFile != "" {
		flag = "auth-issuers-file"
		if c.AuthDiscovery {
			bad("auth-discovery", "give either --auth-issuers-file or --auth-discovery with --auth-issuer, not both")
		}
	}
	issuers, err := c.Issuers()
	if err != nil {
		bad(flag, "%v", err)
		return
	}
	if err := principal.ValidateIssuers(issuers, c.AuthPlatformTenant); err != nil {
		bad(flag, "%v", err)
	}
}

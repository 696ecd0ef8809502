package principal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"

	"github.com/toolcrib/toolcrib/platform/ids"
)

// Issuer configures one OpenID provider whose tokens a [Verifier] accepts.
//
// Each issuer either maps to one tenant (Tenant: every token it issues acts
// for that tenant, and a token whose tenant claim names another is refused)
// or names the claim that carries the tenant (TenantClaim, default
// `tenant`). A tenant mapped to an issuer is that issuer's alone: no other
// issuer's token may name it. The platform tenant's tokens (and so the
// admin, service and confirmer roles) come only from issuers marked
// Platform.
type Issuer struct {
	// URL is the issuer identifier: the token's `iss`, and the base of
	// OpenID Connect discovery (URL + /.well-known/openid-configuration).
	// https, or http on a loopback host (development and tests).
	URL string `json:"url"`
	// Tenant, when set, is the tenant of every token from this issuer.
	Tenant string `json:"tenant,omitempty"`
	// TenantClaim names the claim carrying the tenant; empty means
	// `tenant`. With Tenant set, a token whose TenantClaim names another
	// tenant is refused.
	TenantClaim string `json:"tenant_claim,omitempty"`
	// GroupsClaim names the claim carrying the groups (an array of
	// strings); empty means `groups`.
	GroupsClaim string `json:"groups_claim,omitempty"`
	// Audience is the required `aud`; empty means the verifier's Audience.
	Audience string `json:"audience,omitempty"`
	// Platform lets this issuer's tokens act for the platform tenant.
	Platform bool `json:"platform,omitempty"`
}

// Default claim names of an [Issuer].
const (
	DefaultTenantClaim = "tenant"
	DefaultGroupsClaim = "groups"
)

func (is Issuer) tenantClaim() string {
	if is.TenantClaim == "" {
		return DefaultTenantClaim
	}
	return is.TenantClaim
}

func (is Issuer) groupsClaim() string {
	if is.GroupsClaim == "" {
		return DefaultGroupsClaim
	}
	return is.GroupsClaim
}

// maxIssuers bounds the issuers one verifier trusts.
const maxIssuers = 256

// ValidateIssuers reports every problem with a set of issuers for a
// verifier whose platform tenant is platformTenant.
func ValidateIssuers(issuers []Issuer, platformTenant string) error {
	var errs []error
	if len(issuers) == 0 {
		errs = append(errs, errors.New("no issuer configured"))
	}
	if len(issuers) > maxIssuers {
		errs = append(errs, fmt.Errorf("%d issuers; at most %d", len(issuers), maxIssuers))
	}
	urls := map[string]bool{}
	tenants := map[string]string{}
	for i, is := range issuers {
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("issuer %d (%s): %s", i+1, is.URL, fmt.Sprintf(format, args...)))
		}
		if err := validIssuerURL(is.URL); err != nil {
			bad("%v", err)
		}
		if urls[is.URL] {
			bad("configured twice")
		}
		urls[is.URL] = true
		if is.Tenant != "" {
			if !ids.ValidTenantID(is.Tenant) {
				bad("tenant must match %s", ids.TenantIDPattern)
			}
			if other, ok := tenants[is.Tenant]; ok {
				bad("tenant %s is already mapped to %s; a tenant has one issuer", is.Tenant, other)
			}
			tenants[is.Tenant] = is.URL
			if is.Tenant == platformTenant && !is.Platform {
				bad("mapped to the platform tenant but not marked platform")
			}
		}
	}
	return errors.Join(errs...)
}

func validIssuerURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return errors.New("the URL must be absolute, without query, fragment or user")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
			return nil
		}
		return errors.New("http is allowed only on a loopback host; use https")
	default:
		return errors.New("the URL must be https")
	}
}

// LoadIssuersFile reads a JSON array of [Issuer] from path. Unknown fields
// are refused, so a misspelt setting never silently falls back to a default.
func LoadIssuersFile(path string) ([]Issuer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("principal: read issuers file: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var issuers []Issuer
	if err := dec.Decode(&issuers); err != nil {
		return nil, fmt.Errorf("principal: parse issuers file %s: %w", path, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("principal: parse issuers file %s: trailing data after the array", path)
	}
	return issuers, nil
}

// issuerClaims are the tenant and groups a token's payload carries under an
// issuer's claim names.
type issuerClaims struct {
	tenant        string
	tenantPresent bool
	groups        []string
}

// parseIssuerClaims reads the issuer's tenant and groups claims from a
// verified payload. A tenant claim that is not a string, or a groups claim
// that is not an array of strings, is refused rather than ignored.
func parseIssuerClaims(is Issuer, payload []byte) (issuerClaims, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(payload, &raw); err != nil {
		return issuerClaims{}, fmt.Errorf("%w: claims: %v", ErrInvalidToken, err)
	}
	var c issuerClaims
	if t, ok := raw[is.tenantClaim()]; ok && string(t) != "null" {
		if err := json.Unmarshal(t, &c.tenant); err != nil {
			return issuerClaims{}, fmt.Errorf("%w: the tenant claim is not a string", ErrInvalidToken)
		}
		c.tenantPresent = true
	}
	if g, ok := raw[is.groupsClaim()]; ok && string(g) != "null" {
		if err := json.Unmarshal(g, &c.groups); err != nil {
			return issuerClaims{}, fmt.Errorf("%w: the groups claim is not an array of strings", ErrInvalidToken)
		}
	}
	return c, nil
}

// Reasons a token's tenant is refused for its issuer.
var (
	// ErrTenantMismatch: the issuer is mapped to one tenant and the token's
	// tenant claim names another.
	ErrTenantMismatch = errors.New("the token's tenant claim names another tenant than its issuer's")
	// ErrTenantOfOtherIssuer: the token names a tenant mapped to another
	// issuer.
	ErrTenantOfOtherIssuer = errors.New("the token names a tenant mapped to another issuer")
	// ErrPlatformTenantNotTrusted: the token names the platform tenant and
	// its issuer is not the platform's.
	ErrPlatformTenantNotTrusted = errors.New("the token names the platform tenant and its issuer is not the platform's")
)

// issuerTenant decides the tenant a token from issuer is acts for, given
// the tenant claim it carries. owners maps each tenant mapped to an issuer
// to that issuer's URL.
func issuerTenant(is Issuer, c issuerClaims, owners map[string]string, platformTenant string) (string, error) {
	if is.Tenant != "" {
		if c.tenantPresent && c.tenant != is.Tenant {
			return "", fmt.Errorf("%w: %w", ErrInvalidToken, ErrTenantMismatch)
		}
		return is.Tenant, nil
	}
	if c.tenant == "" {
		return "", nil
	}
	if owner, ok := owners[c.tenant]; ok && owner != is.URL {
		return "", fmt.Errorf("%w: %w", ErrInvalidToken, ErrTenantOfOtherIssuer)
	}
	if c.tenant == platformTenant && !is.Platform {
		return "", fmt.Errorf("%w: %w", ErrInvalidToken, ErrPlatformTenantNotTrusted)
	}
	return c.tenant, nil
}

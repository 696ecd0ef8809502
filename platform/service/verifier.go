package service

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/toolcrib/toolcrib/platform/config"
	"github.com/toolcrib/toolcrib/platform/principal"
)

// NewVerifier builds the token verifier every service's interceptors (and
// the gateway's bearer check) use: the JWKS file, or the OpenID providers
// of --auth-issuer / --auth-issuers-file found by discovery, whose keys are
// refreshed until ctx ends (failures to fetch them logged on logger).
func NewVerifier(ctx context.Context, c config.Common, logger *slog.Logger) (*principal.Verifier, error) {
	identities, err := principal.ParseServiceIdentities(c.TLSServiceIdentities)
	if err != nil {
		return nil, fmt.Errorf("--tls-service-identities: %w", err)
	}
	cfg := principal.VerifierConfig{
		Issuer: c.AuthIssuer, Audience: c.AuthAudience, PlatformTenant: c.AuthPlatformTenant,
		AdminGroup: c.AdminGroup, ServiceGroup: c.ServiceGroup, ConfirmerGroup: c.ConfirmerGroup, MaxLifetime: c.AuthMaxTokenLifetime,
		ServiceIdentities: identities, ConditionClaims: splitList(c.ConditionClaims),
	}
	d, ok, err := c.Discovery()
	if err != nil {
		return nil, err
	}
	if ok {
		d.Logger = logger
		return principal.NewOIDCVerifier(ctx, cfg, d)
	}
	return principal.LoadVerifier(c.AuthJWKS, cfg)
}

// splitList splits a comma-separated flag value, dropping empty entries.
func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

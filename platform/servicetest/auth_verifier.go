package servicetest

import (
	"testing"

	"github.com/toolcrib/toolcrib/platform/principal"
)

// Verifier returns a verifier of this Auth's tokens, configured like the
// services under test (issuer, audience, admin and service groups), for
// fakes that must authenticate callers the way the real service does.
func (a *Auth) Verifier(t testing.TB) *principal.Verifier {
	t.Helper()
	v, err := principal.LoadVerifier(a.JWKSPath, principal.VerifierConfig{
		Issuer: Issuer, Audience: Audience, AdminGroup: AdminGroup, ServiceGroup: ServiceGroup, ConfirmerGroup: ConfirmerGroup,
		PlatformTenant: PlatformTenant})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

package watchtest

import (
	"testing"

	"github.com/toolcrib/toolcrib/platform/servicetest"
)

// Token mints who's token with auth: the platform admin and service of
// servicetest, alice of [TenantA], bob of [TenantB], and a principal with
// no tenant for any other caller. Every target's Open uses it, so the real
// services and the fakes are called by the same principals.
func Token(t testing.TB, auth *servicetest.Auth, who Caller) string {
	switch who {
	case Admin:
		return auth.Admin(t)
	case Service:
		return auth.Service(t)
	case UserA:
		return auth.User(t, "alice", TenantA)
	case UserB:
		return auth.User(t, "bob", TenantB)
	}
	return auth.User(t, "nobody", "")
}

package discoverytest_test

import (
	"testing"
	"time"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/changelog/watchtest"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/discovery/discoverytest"
)

// The fake registry discovery's tests use passes the Watch contract suite,
// like the real registry does.
func TestFakeRegistryPassesTheWatchContract(t *testing.T) {
	watchtest.Run(t, func(t *testing.T) watchtest.Target {
		auth := servicetest.NewAuth(t)
		r, addr := discoverytest.StartRegistry(t, auth)
		r.Heartbeat = 250 * time.Millisecond
		r.AddTenant(watchtest.TenantA)
		r.AddTenant(watchtest.TenantB)
		return watchtest.Target{
			Open: watchtest.RegistryOpener(func(who watchtest.Caller) registryv1.RegistryServiceClient {
				return registryv1.NewRegistryServiceClient(servicetest.Dial(t, addr, watchtest.Token(t, auth, who)))
			}),
			// A class change and the epoch bump it causes, both the tenant's.
			Commit: func(_ testing.TB, tenant string) int64 {
				return r.PutClass(&registryv1.AudienceClass{Name: tenant + ".readers", TenantId: tenant})
			},
			Compact:   func(_ testing.TB, through int64) { r.Compact(through) },
			Drain:     func(testing.TB) { r.Drain() },
			Heartbeat: r.Heartbeat,
		}
	})
}

package registrytest_test

import (
	"testing"
	"time"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/platform/changelog/watchtest"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/registry/registrytest"
)

// The fake discovery the registry's tests follow passes the Watch contract
// suite, like the real discovery service does.
func TestFakeDiscoveryPassesTheWatchContract(t *testing.T) {
	watchtest.Run(t, func(t *testing.T) watchtest.Target {
		auth := servicetest.NewAuth(t)
		d := registrytest.NewDiscovery(t, auth)
		d.Heartbeat = 250 * time.Millisecond
		return watchtest.Target{
			Open: watchtest.DiscoveryOpener(func(who watchtest.Caller) discoveryv1.DiscoveryServiceClient {
				return discoveryv1.NewDiscoveryServiceClient(servicetest.Dial(t, d.Addr, watchtest.Token(t, auth, who)))
			}),
			Commit: func(_ testing.TB, tenant string) int64 {
				_, rev := d.Commit("inventory", tenant+".readers")
				return rev
			},
			Compact:   func(_ testing.TB, through int64) { d.Compact(through) },
			Drain:     func(testing.TB) { d.Drain() },
			Heartbeat: d.Heartbeat,
		}
	})
}

package registry_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/changelog/watchtest"
	"github.com/toolcrib/toolcrib/platform/postgres"
	"github.com/toolcrib/toolcrib/services/registry"
	"github.com/toolcrib/toolcrib/services/registry/registrytest"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// RegistryService.Watch passes the Watch contract suite, run against the
// real registry (its Run, PostgreSQL, real tokens).
func TestWatchContract(t *testing.T) {
	watchtest.Run(t, func(t *testing.T) watchtest.Target {
		r := registrytest.Start(t, registrytest.Options{NoDiscovery: true, Configure: func(c *registry.Config) {
			c.WatchHeartbeat = 250 * time.Millisecond
		}})
		ctx := context.Background()
		pool, err := postgres.Open(ctx, r.PostgresURL, registry.Schema)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		log := changelog.New(pool, "unused", slog.New(slog.NewTextHandler(io.Discard, nil)))
		admin := r.Admin(t)
		n := 0
		commit := func(_ testing.TB, tenant string) int64 {
			n++
			if _, err := admin.PutTenant(ctx, &registryv1.PutTenantRequest{Tenant: &registryv1.Tenant{
				TenantId: tenant, DisplayName: fmt.Sprintf("%s #%d", tenant, n)}}); err != nil {
				t.Fatal(err)
			}
			head, err := log.Head(ctx) // nothing else writes to the log here
			if err != nil {
				t.Fatal(err)
			}
			return head
		}
		commit(t, watchtest.TenantA)
		commit(t, watchtest.TenantB)
		return watchtest.Target{
			Open: watchtest.RegistryOpener(func(who watchtest.Caller) registryv1.RegistryServiceClient {
				return r.Client(t, watchtest.Token(t, r.Auth, who))
			}),
			Commit: commit,
			// What the compaction job does, on demand.
			Compact: func(_ testing.TB, through int64) {
				head, err := log.Head(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := log.Compact(ctx, time.Now().Add(time.Hour), int(head-through)); err != nil {
					t.Fatal(err)
				}
			},
			Drain:     func(testing.TB) { r.Drain() },
			Heartbeat: 250 * time.Millisecond,
		}
	})
}

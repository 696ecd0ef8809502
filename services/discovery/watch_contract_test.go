package discovery_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/changelog/watchtest"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/postgres"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/discovery"
	"github.com/toolcrib/toolcrib/services/discovery/discoverytest"
	"github.com/toolcrib/toolcrib/services/discovery/internal/store"
)

// DiscoveryService.Watch passes the Watch contract suite, run against the
// real discovery (its Run, PostgreSQL, real tokens, real scans of an MCP
// server: every change is a scan's pointer move).
func TestWatchContract(t *testing.T) {
	watchtest.Run(t, func(t *testing.T) watchtest.Target {
		auth := servicetest.NewAuth(t)
		url := pgtest.NewDatabase(t, pgtest.Schema{Name: "discovery", Sets: discovery.Spec().Migrations})
		e := startOn(t, auth, url, newRegFake(t, auth), func(c *discovery.Config) { c.WatchHeartbeat = 250 * time.Millisecond })
		srv := discoverytest.NewHTTP(t, discoverytest.NewCatalog("r-1", 0, discoverytest.Tools("x", 2)...), discoverytest.ServerOptions{}, false)
		e.reg.PutServer(&registryv1.Server{ServerId: "inventory", Owner: "team", TrustLevel: registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY,
			RevisionSource: registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED, ScanInterval: durationpb.New(time.Hour),
			Transport: &registryv1.Server_StreamableHttp{StreamableHttp: &registryv1.StreamableHttpTransport{Url: srv.URL}}})
		for _, tenant := range []string{watchtest.TenantA, watchtest.TenantB} {
			e.reg.AddTenant(tenant)
			e.reg.PutClass(&registryv1.AudienceClass{Name: tenant + ".readers", TenantId: tenant,
				Servers: []*registryv1.AudienceServer{{ServerId: "inventory", SecretRef: "env:" + envRef}}})
		}
		ctx := context.Background()
		pool, err := postgres.Open(ctx, url, store.Schema)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		log := changelog.New(pool, "unused", slog.New(slog.NewTextHandler(io.Discard, nil)))
		return watchtest.Target{
			Open: watchtest.DiscoveryOpener(func(who watchtest.Caller) discoveryv1.DiscoveryServiceClient {
				return e.client(watchtest.Token(t, auth, who))
			}),
			// A scan of the tenant's class: its pointer moves (activate,
			// then refresh) once per scan.
			Commit: func(_ testing.TB, tenant string) int64 {
				class := tenant + ".readers"
				before, err := log.Head(ctx)
				if err != nil {
					t.Fatal(err)
				}
				r := e.scanAndWait("inventory", class)
				rev := e.active("inventory", class).GetPointer().GetRevision()
				if rev <= before {
					t.Fatalf("scan of %s ended %v %v without moving the pointer (revision %d)", class, r.GetState(), r.GetReason(), rev)
				}
				return rev
			},
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
			Drain:     func(testing.TB) { e.cancel() },
			Heartbeat: 250 * time.Millisecond,
		}
	})
}

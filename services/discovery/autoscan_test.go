package discovery_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/discovery"
	"github.com/toolcrib/toolcrib/services/discovery/discoverytest"
)

// runsOf lists the runs of a pair, newest first.
func (e *env) runsOf(server, className string) []*discoveryv1.Run {
	e.t.Helper()
	resp, err := e.admin.ListRuns(ctxT(e.t), &discoveryv1.ListRunsRequest{ServerId: server, AudienceClass: className})
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.GetRuns()
}

func TestRegistryChangesAndRefreshQueueScans(t *testing.T) {
	e := start(t, func(c *discovery.Config) {
		c.NoAutoScans = false
		c.RefreshTick, c.RefreshInterval = 300*time.Millisecond, time.Hour
	})
	cat := discoverytest.NewCatalog("r-1", 0, discoverytest.Tools("x", 2)...)
	srv := discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{}, false)
	// Registering a server and binding it to a class queues its first scan.
	e.register("inventory", srv.URL, registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED, "")
	servicetest.Eventually(t, 20*time.Second, "the first scan", func() bool {
		rs := e.runsOf("inventory", class)
		return len(rs) > 0 && rs[0].GetState() == eligible
	})
	// Discovery's own first-use pin (a server update) queues nothing.
	time.Sleep(time.Second)
	if rs := e.runsOf("inventory", class); len(rs) != 1 {
		t.Fatalf("%d runs after the first-use pin, want 1: %v", len(rs), rs)
	}
	// A shorter scan interval makes the periodic refresh rescan it.
	s := e.reg.GetServerRecord("inventory")
	s.ScanInterval = durationpb.New(time.Second)
	e.reg.PutServer(s)
	servicetest.Eventually(t, 20*time.Second, "a periodic rescan", func() bool {
		for _, r := range e.runsOf("inventory", class) {
			if r.GetTrigger() == discoveryv1.ScanTrigger_SCAN_TRIGGER_PERIODIC && r.GetReason() == discoveryv1.RunReason_RUN_REASON_UNCHANGED {
				return true
			}
		}
		return false
	})
	// A new binding of the server queues a scan of the new pair.
	e.bind("tenant-a.writers", "inventory", "env:"+envRef)
	servicetest.Eventually(t, 20*time.Second, "a scan of the new binding", func() bool {
		rs := e.runsOf("inventory", "tenant-a.writers")
		return len(rs) > 0 && rs[len(rs)-1].GetTrigger() == discoveryv1.ScanTrigger_SCAN_TRIGGER_REGISTRY_CHANGE && rs[0].GetState() == eligible
	})
}

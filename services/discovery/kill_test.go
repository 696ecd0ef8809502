package discovery_test

import (
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/discovery"
	"github.com/toolcrib/toolcrib/services/discovery/discoverytest"
)

// TestWorkerKilledMidScanIsRetriedByAnother runs two worker sets on one
// database: a child process (this test binary) takes a scan whose server
// blocks in the middle of pagination and is killed with SIGKILL. Nothing is
// activated; River rescues the stuck job; the other worker set marks the
// dead run INCOMPLETE WORKER_LOST and proves the catalog.
func TestWorkerKilledMidScanIsRetriedByAnother(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a process and waits for River's rescue (about 30 s)")
	}
	auth := servicetest.NewAuth(t)
	url := pgtest.NewDatabase(t, pgtest.Schema{Name: "discovery", Sets: discovery.Spec().Migrations})
	reg := newRegFake(t, auth)

	blocked := make(chan struct{}, 1)
	hold := make(chan struct{})
	var holdOnce sync.Once
	t.Cleanup(func() { holdOnce.Do(func() { close(hold) }) })
	cat := discoverytest.NewCatalog("r-1", 1, discoverytest.Tools("x", 3)...)
	cat.OnList = func(c *discoverytest.Catalog, call int, cursor *string, r *discoverytest.Reply) {
		if call == 1 { // the first scan's second page: block until the worker dies
			r.Wait = hold
			blocked <- struct{}{}
		}
	}
	srv := discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{}, false)
	e0 := &env{t: t, reg: reg}
	e0.register("inventory", srv.URL, registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED, "")

	// Worker set A: a child process.
	common := auth.Common(t, url, false, nil)
	childAddr, cmd := discoverytest.StartChild(t, discoverytest.Child{PostgresURL: url, JWKS: auth.JWKSPath,
		TokenFile: common.ServiceTokenFile, RegistryAddr: reg.addr, Worker: "worker-a:killed", Fallback: secret, EnvPrefixes: envRef})
	child := discoveryv1.NewDiscoveryServiceClient(servicetest.Dial(t, childAddr, auth.Admin(t)))
	tk, err := child.TriggerScan(ctxT(t), &discoveryv1.TriggerScanRequest{ServerId: "inventory", AudienceClass: class})
	if err != nil {
		t.Fatal(err)
	}
	scanID := tk.GetScans()[0].GetScanId()
	select {
	case <-blocked:
	case <-time.After(30 * time.Second):
		t.Fatal("the child never reached page 2")
	}

	// Worker set B, in this process; then A dies mid-pagination.
	b := startOn(t, auth, url, reg, func(c *discovery.Config) {
		c.Worker = "worker-b:alive"
		c.ScanTimeout, c.RescueAfter = 2*time.Second, 3*time.Second
	})
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if _, err := b.admin.GetActiveSnapshot(ctxT(t), &discoveryv1.GetActiveSnapshotRequest{ServerId: "inventory", AudienceClass: class}); status.Code(err) != codes.NotFound {
		t.Fatalf("the killed scan activated something: %v", err)
	}

	r := b.wait(scanID, nil)
	want(t, r, eligible, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
	if r.GetWorker() != "worker-b:alive" || r.GetAttempt() < 2 || r.GetGeneration() != 1 {
		t.Fatalf("retry %v", r)
	}
	runs, err := b.admin.ListRuns(ctxT(t), &discoveryv1.ListRunsRequest{ScanId: scanID})
	if err != nil {
		t.Fatal(err)
	}
	lost := runs.GetRuns()[len(runs.GetRuns())-1]
	want(t, lost, incomplete, discoveryv1.RunReason_RUN_REASON_WORKER_LOST)
	if lost.GetWorker() != "worker-a:killed" || lost.GetAttempt() != 1 || lost.GetGeneration() != 0 {
		t.Fatalf("lost run %v", lost)
	}
}

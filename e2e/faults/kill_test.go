package faults_test

import (
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/discovery"
	"github.com/toolcrib/toolcrib/services/discovery/discoverytest"
)

// TestDiscoveryKilledMidPaginationIsRetriedElsewhere: a discovery process
// (a child process: this test binary running discovery.Run) takes a scan;
// the fixture holds it after page 1; the process is killed with SIGKILL,
// its MCP session dropping mid-pagination. Nothing is activated. Another
// discovery process sharing the database (and River's queue) rescues the
// stuck job, records the dead run INCOMPLETE WORKER_LOST and scans again;
// the retry proves the whole catalog (the oracle agrees on the retry's own
// scan) and commits generation 1.
func TestDiscoveryKilledMidPaginationIsRetriedElsewhere(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a process and waits for River to rescue its job")
	}
	t.Parallel()
	auth := servicetest.NewAuth(t)
	dbURL := pgtest.NewDatabase(t, pgtest.Schema{Name: "discovery", Sets: discovery.Spec().Migrations})
	reg, regAddr := discoverytest.StartRegistry(t, auth)
	reg.AddTenant(tenant)
	const server = "inventory"
	s := startFixture(t, fixture.Script{Versioned: true, PageSize: 2, Tools: tools("inv", 6),
		Steps: []fixture.Step{{Request: 2, Block: true}}})
	t.Cleanup(func() { s.Release(2) })
	(&env{t: t, reg: reg}).register(server, overHTTP(serveHTTP(t, s, fixture.HTTPOptions{}).URL), serverProvided, "")

	// Worker set A: a child process.
	common := auth.Common(t, dbURL, false, nil)
	childAddr, cmd := discoverytest.StartChild(t, discoverytest.Child{PostgresURL: dbURL, JWKS: auth.JWKSPath,
		TokenFile: common.ServiceTokenFile, RegistryAddr: regAddr, Worker: "worker-a:killed", Secrets: secrets, EnvPrefixes: "FAULTS_"})
	child := discoveryv1.NewDiscoveryServiceClient(servicetest.Dial(t, childAddr, auth.Admin(t)))
	tk, err := child.TriggerScan(ctxT(t), &discoveryv1.TriggerScanRequest{ServerId: server, AudienceClass: class})
	if err != nil {
		t.Fatal(err)
	}
	id := tk.GetScans()[0].GetScanId()
	select {
	case <-s.Blocked(2):
	case <-time.After(30 * time.Second):
		t.Fatal("the child never reached page 2")
	}

	// Worker set B in this process; then A dies in the middle of the scan.
	b := startDiscovery(t, envOptions{auth: auth, registryAddr: regAddr, reg: reg, dbURL: dbURL, configure: func(c *discovery.Config) {
		c.Worker = "worker-b:alive"
		c.ScanTimeout, c.RescueAfter = 2*time.Second, 3*time.Second
	}})
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if b.active(server, class) != nil {
		t.Fatal("the killed scan activated something")
	}
	s.Release(2) // the held request now answers a connection nobody reads

	final := b.wait(id, nil)
	want(t, final, eligible, noReason)
	if final.GetWorker() != "worker-b:alive" || final.GetAttempt() < 2 || final.GetGeneration() != 1 {
		t.Fatalf("retry: worker %s attempt %d generation %d", final.GetWorker(), final.GetAttempt(), final.GetGeneration())
	}
	runs := b.runs(id)
	lost := runs[0]
	want(t, lost, incomplete, discoveryv1.RunReason_RUN_REASON_WORKER_LOST)
	if lost.GetWorker() != "worker-a:killed" || lost.GetAttempt() != 1 || lost.GetGeneration() != 0 {
		t.Fatalf("the killed run: worker %s attempt %d generation %d", lost.GetWorker(), lost.GetAttempt(), lost.GetGeneration())
	}
	b.onlyGenerationsFrom(server, class, final)
	events := s.Log().Events()
	b.checkWhole(t, server, class, events)
	scans := scanLogs(events)
	agrees(t, final, judge(t, scans[len(scans)-1], serverProvided))
}

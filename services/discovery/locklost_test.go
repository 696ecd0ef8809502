package discovery_test

import (
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/services/discovery/discoverytest"
)

// A discovery process holds the pair locks of all its scans on one
// Postgres session. When that session dies while a scan is in flight (its
// backend terminated here, as a failover or an idle-session killer would),
// the next statement on it finds it dead: the scan holding a lock on it
// stops at once, ends INCOMPLETE WORKER_LOST saying its lock was lost, and
// is retried on a new session; nothing is activated by the stopped scan,
// and the scan whose start found the session dead is retried and proves
// its catalog too.
func TestLockSessionLostStopsItsScans(t *testing.T) {
	e := start(t, nil)
	blocked := make(chan struct{}, 1)
	hold := make(chan struct{})
	var holdOnce sync.Once
	release := func() { holdOnce.Do(func() { close(hold) }) }
	t.Cleanup(release)
	slow := discoverytest.NewCatalog("r-1", 1, discoverytest.Tools("x", 3)...)
	slow.OnList = func(c *discoverytest.Catalog, call int, cursor *string, r *discoverytest.Reply) {
		if call == 1 { // the first scan's second page: block until released
			r.Wait = hold
			blocked <- struct{}{}
		}
	}
	e.register("alpha", discoverytest.NewHTTP(t, slow, discoverytest.ServerOptions{}, false).URL,
		registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED, "")
	e.register("beta", discoverytest.NewHTTP(t, discoverytest.NewCatalog("r-1", 2, discoverytest.Tools("y", 2)...),
		discoverytest.ServerOptions{}, false).URL, registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED, "")

	alpha := e.scan("alpha", class).GetScanId()
	select {
	case <-blocked:
	case <-time.After(30 * time.Second):
		t.Fatal("alpha's scan never reached page 2")
	}

	// The one session of this database holding a bigint-keyed advisory
	// lock (objsubid 1; the process's presence lock has two int keys) is
	// the process's lock session, holding alpha's pair lock; end it.
	conn, err := pgx.Connect(ctxT(t), e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctxT(t))
	var pids []int32
	rows, err := conn.Query(ctxT(t), `SELECT DISTINCT l.pid FROM pg_locks l JOIN pg_database d ON d.oid = l.database
WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted AND d.datname = current_database()`)
	if err != nil {
		t.Fatal(err)
	}
	if pids, err = pgx.CollectRows(rows, pgx.RowTo[int32]); err != nil {
		t.Fatal(err)
	}
	if len(pids) != 1 {
		t.Fatalf("sessions holding pair locks while one scan is in flight: %v, want one", pids)
	}
	var ended bool
	if err := conn.QueryRow(ctxT(t), `SELECT pg_terminate_backend($1)`, pids[0]).Scan(&ended); err != nil || !ended {
		t.Fatalf("terminate the lock session %d: %v %v", pids[0], ended, err)
	}

	// The next scan's start runs on the dead session and finds it.
	beta := e.scan("beta", class).GetScanId()
	lost := e.wait(alpha, func(r *discoveryv1.Run) bool { return r.GetFinishedAt() != nil })
	want(t, lost, incomplete, discoveryv1.RunReason_RUN_REASON_WORKER_LOST)
	wantDetail(t, lost, "session holding the scan's pair lock was lost")
	if lost.GetAttempt() != 1 || lost.GetGeneration() != 0 {
		t.Fatalf("lost run %v", lost)
	}
	want(t, e.wait(beta, nil), eligible, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)

	// alpha's retry, on a new session, proves its catalog once the server
	// answers again.
	release()
	retry := e.wait(alpha, nil)
	want(t, retry, eligible, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
	if retry.GetAttempt() < 2 || retry.GetGeneration() != 1 {
		t.Fatalf("retry %v", retry)
	}
}

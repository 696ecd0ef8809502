package store_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/types/known/timestamppb"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/platform/canonical"
	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/postgres"
	"github.com/toolcrib/toolcrib/services/discovery/candidate"
	"github.com/toolcrib/toolcrib/services/discovery/crawl"
	"github.com/toolcrib/toolcrib/services/discovery/internal/store"
)

const (
	eligible    = catalogv1.DiscoveryState_DISCOVERY_STATE_ELIGIBLE
	unversioned = catalogv1.DiscoveryState_DISCOVERY_STATE_UNVERSIONED_OBSERVATION
	retired     = catalogv1.DiscoveryState_DISCOVERY_STATE_RETIRED
)

type fixture struct {
	st   *store.Store
	pool *pgxpool.Pool
	log  *changelog.Log
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	url := pgtest.NewDatabase(t, pgtest.Schema{Name: store.Schema, Sets: store.Sets()})
	pool, err := postgres.Open(context.Background(), url, store.Schema)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	log := changelog.New(pool, "discovery_changes", slog.New(slog.DiscardHandler))
	return &fixture{st: store.New(pool, log), pool: pool, log: log}
}

func (f *fixture) run(t testing.TB, server, aud string) string {
	t.Helper()
	id, err := f.st.StartRun(context.Background(), store.NewRun{ScanID: "1", Attempt: 1, ServerID: server, AudienceClass: aud,
		TenantID: "tenant-a", Trigger: discoveryv1.ScanTrigger_SCAN_TRIGGER_MANUAL, Worker: "test:1"})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

const rawTool = `{ "name": "%s", "x-extra": true, "inputSchema": {"type":"object"} }`

func snapshot(server, aud, rev string, tools int, ttl time.Duration) *catalogv1.Snapshot {
	now := time.Now().Truncate(time.Microsecond)
	s := &catalogv1.Snapshot{
		Schema: "toolCatalogSnapshot.v1", ServerId: server, AudienceClass: aud, Tenant: "tenant-a",
		IdentityDigest: crawl.URLDigest("http://127.0.0.1/mcp"), EndpointDigest: crawl.URLDigest("http://127.0.0.1/mcp"),
		ProtocolVersion: "2025-11-25", DiscoveryStartedAt: timestamppb.New(now), ExpiresAt: timestamppb.New(now.Add(ttl)),
		PolicyEpoch: 7, SourceRevision: rev, PageRoot: canonical.DigestBytes([]byte(rev)), PageDigests: []string{canonical.DigestBytes([]byte(rev))},
		CacheScope: "shared", TrustConfigDigest: canonical.DigestBytes([]byte("trust")),
	}
	for i := range tools {
		raw := []byte(fmt.Sprintf(rawTool, fmt.Sprintf("t%d", i)))
		d, _ := canonical.Digest(raw)
		s.Tools = append(s.Tools, &catalogv1.ToolDescriptor{ToolId: server + ".t" + fmt.Sprint(i), Name: fmt.Sprintf("t%d", i),
			DescriptorDigest: d, InputSchemaDigest: canonical.DigestBytes([]byte(`{"type":"object"}`)), SchemaDialect: "2020-12", Raw: raw})
	}
	return s
}

func (f *fixture) commit(t *testing.T, server, aud, rev string, exp store.Expected, ttl time.Duration) (*store.Committed, error) {
	t.Helper()
	run := f.run(t, server, aud)
	return f.st.Commit(context.Background(), store.Commit{RunID: run, Expected: exp, Snapshot: snapshot(server, aud, rev, 3, ttl),
		State: eligible, Run: store.RunEnd{SourceRevision: rev, ToolCount: 3, Pages: []crawl.Page{{Index: 0, ToolCount: 3, Digest: "sha256:x", ReceivedAt: time.Now()}}}})
}

func (f *fixture) view(t *testing.T, server, aud string) store.Expected {
	t.Helper()
	v, err := f.st.View(context.Background(), server, aud)
	if err != nil {
		t.Fatal(err)
	}
	return v.Expected
}

func TestCommitMovesThePointerAndWritesEverythingTogether(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	c1, err := f.commit(t, "inv", "tenant-a.readers", "r1", store.Expected{}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if c1.Pointer.Generation != 1 || c1.Receipt.PreviousGeneration != 0 || c1.Receipt.Move != catalogv1.PointerMove_POINTER_MOVE_ACTIVATE || c1.Pointer.Revision != 1 {
		t.Fatalf("first commit: %v %v", c1.Pointer, c1.Receipt)
	}
	c2, err := f.commit(t, "inv", "tenant-a.readers", "r2", f.view(t, "inv", "tenant-a.readers"), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if c2.Pointer.Generation != 2 || c2.Receipt.PreviousGeneration != 1 {
		t.Fatalf("second commit: %v", c2.Receipt)
	}
	gens, _, err := f.st.ListGenerations(ctx, "inv", "tenant-a.readers", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(gens) != 2 || gens[0].State != eligible || !gens[0].Active || gens[1].State != retired || gens[1].Active {
		t.Fatalf("generations: %v", gens)
	}
	snap, total, err := f.st.Snapshot(ctx, "inv", "tenant-a.readers", 2, 0, 0)
	if err != nil || total != 3 || len(snap.Tools) != 3 {
		t.Fatalf("snapshot: %v %d %v", snap, total, err)
	}
	if string(snap.Tools[0].Raw) != fmt.Sprintf(rawTool, "t0") {
		t.Fatalf("raw JSON changed in storage: %s", snap.Tools[0].Raw)
	}
	// Anyone holding the snapshot can recompute its digest.
	if d, err := candidate.SnapshotDigest(snap, eligible); err != nil || d != snap.SnapshotDigest {
		t.Fatalf("snapshot digest %s, recomputed %s (%v)", snap.SnapshotDigest, d, err)
	}
	run, err := f.st.GetRun(ctx, c2.Receipt.RunId, true)
	if err != nil || run.State != eligible || run.Generation != 2 || len(run.Pages) != 1 || run.FinishedAt == nil {
		t.Fatalf("run: %v %v", run, err)
	}
	entries, err := f.log.Read(ctx, 0, 10)
	if err != nil || len(entries) != 2 {
		t.Fatalf("change log: %v %v", entries, err)
	}
	ch, err := store.DecodeChange(entries[1])
	if err != nil || ch.Revision != 2 || ch.Pointer.Generation != 2 || ch.Receipt.ReceiptId != c2.Receipt.ReceiptId {
		t.Fatalf("change: %v %v", ch, err)
	}
}

func TestLostCASWritesNothing(t *testing.T) {
	f := newFixture(t)
	if _, err := f.commit(t, "inv", "a.b", "r1", store.Expected{}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if v := f.view(t, "inv", "a.b"); v != (store.Expected{Generation: 1, Revision: 1, LastGeneration: 1}) {
		t.Fatalf("view after the first commit: %+v", v)
	}
	// A commit knows the generation it creates before its CAS (the last
	// one + 1) and writes under it in the CAS's statement: a wrong last
	// generation loses the CAS like a wrong generation or revision, and
	// nothing of any lost commit is written, its run's end included.
	for _, exp := range []store.Expected{{}, {Generation: 2, Revision: 1}, {Generation: 1, Revision: 99},
		{Generation: 1, Revision: 1, LastGeneration: 2}, {Generation: 1, Revision: 1, LastGeneration: 7},
		{Generation: 2, Revision: 1, LastGeneration: 1}} {
		if _, err := f.commit(t, "inv", "a.b", "r2", exp, time.Hour); !errors.Is(err, store.ErrCASConflict) {
			t.Fatalf("expected %v: %v, want a CAS conflict", exp, err)
		}
	}
	var snaps, tools, gens, receipts, ended, pages int
	if err := f.pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM snapshots), (SELECT count(*) FROM snapshot_tools),
(SELECT count(*) FROM generations), (SELECT count(*) FROM receipts), (SELECT count(*) FROM runs WHERE finished_at IS NOT NULL),
(SELECT count(*) FROM run_pages)`).
		Scan(&snaps, &tools, &gens, &receipts, &ended, &pages); err != nil {
		t.Fatal(err)
	}
	if snaps != 1 || tools != 3 || gens != 1 || receipts != 1 || ended != 1 || pages != 1 {
		t.Fatalf("after lost CASes: %d snapshots, %d tools, %d generations, %d receipts, %d ended runs, %d run pages",
			snaps, tools, gens, receipts, ended, pages)
	}
	// Without the last generation (zero) the commit reads it in its
	// transaction and wins as well.
	c, err := f.commit(t, "inv", "a.b", "r2", store.Expected{Generation: 1, Revision: 1}, time.Hour)
	if err != nil || c.Pointer.Generation != 2 {
		t.Fatalf("commit without the last generation: %v %v", c, err)
	}
}

func TestConcurrentCommitsToOnePointerExactlyOneWins(t *testing.T) {
	f := newFixture(t)
	for round, exp := range []func() store.Expected{
		func() store.Expected { return store.Expected{} },              // first generation: INSERT race
		func() store.Expected { return f.view(t, "inv", "a.readers") }, // N -> N+1: UPDATE race
	} {
		e := exp()
		const n = 8
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() { _, errs[i] = f.commit(t, "inv", "a.readers", fmt.Sprintf("r%d-%d", round, i), e, time.Hour) })
		}
		wg.Wait()
		wins := 0
		for _, err := range errs {
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, store.ErrCASConflict):
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d commits won", round, wins)
		}
	}
	p, err := f.st.ActivePointer(context.Background(), "inv", "a.readers")
	if err != nil || p.Generation != 2 {
		t.Fatalf("pointer %v %v", p, err)
	}
}

func TestSnapshotsAreImmutableInTheDatabase(t *testing.T) {
	f := newFixture(t)
	if _, err := f.commit(t, "inv", "a.b", "r1", store.Expected{}, time.Hour); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, q := range []string{
		`UPDATE snapshots SET source_revision = 'forged'`,
		`UPDATE snapshot_tools SET raw = '\x00'`,
		`DELETE FROM snapshot_tools`,
		`DELETE FROM snapshots`,
		`TRUNCATE snapshot_tools`,
		`TRUNCATE snapshots CASCADE`,
	} {
		if _, err := f.pool.Exec(ctx, q); err == nil {
			t.Errorf("%s was allowed", q)
		}
	}
	// Even the retention switch never deletes the pointer's generation.
	tx, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL toolcrib.retention = 'on'"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM snapshots`); err == nil {
		t.Fatal("the active generation was deleted")
	}
}

func TestRefreshExtendsTheActiveGeneration(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	c, err := f.commit(t, "inv", "a.b", "r1", store.Expected{}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	exp := f.view(t, "inv", "a.b")
	later := time.Now().Add(5 * time.Hour).Truncate(time.Microsecond)
	run := f.run(t, "inv", "a.b")
	r, err := f.st.Refresh(ctx, run, "inv", "a.b", exp, later, 8, store.RunEnd{State: catalogv1.DiscoveryState_DISCOVERY_STATE_SNAPSHOT_PROVEN}, nil, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Pointer.Generation != 1 || !r.Pointer.FreshUntil.AsTime().Equal(later) || r.Receipt.Move != catalogv1.PointerMove_POINTER_MOVE_REFRESH {
		t.Fatalf("refresh: %v %v", r.Pointer, r.Receipt)
	}
	got, _ := f.st.GetRun(ctx, run, false)
	if got.Reason != discoveryv1.RunReason_RUN_REASON_UNCHANGED || got.ConfirmedGeneration != 1 || got.Generation != 0 {
		t.Fatalf("run %v", got)
	}
	// A refresh is a change: the old expectation no longer holds.
	if _, err := f.st.Refresh(ctx, f.run(t, "inv", "a.b"), "inv", "a.b", exp, later, 8, store.RunEnd{}, nil, 0, nil); !errors.Is(err, store.ErrCASConflict) {
		t.Fatalf("stale refresh: %v", err)
	}
	_ = c
}

func TestRollback(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.commit(t, "inv", "a.b", "r1", store.Expected{}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := f.commit(t, "inv", "a.b", "r2", f.view(t, "inv", "a.b"), -time.Minute); err != nil { // expired at once
		t.Fatal(err)
	}
	if _, err := f.commit(t, "inv", "a.b", "r3", f.view(t, "inv", "a.b"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Rollback(ctx, "inv", "a.b", 2, 0, ""); !errors.Is(err, store.ErrCASConflict) {
		t.Fatalf("wrong expected: %v", err)
	}
	if _, err := f.st.Rollback(ctx, "inv", "a.b", 3, 2, ""); !errors.Is(err, store.ErrNotFresh) {
		t.Fatalf("expired target: %v", err)
	}
	if _, err := f.st.Rollback(ctx, "inv", "a.b", 3, 9, ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown target: %v", err)
	}
	// 3 -> the newest fresh older generation: 1 (2 has expired).
	rb, err := f.st.Rollback(ctx, "inv", "a.b", 3, 0, "missing tools")
	if err != nil {
		t.Fatal(err)
	}
	if rb.Pointer.Generation != 1 || rb.Pointer.State != discoveryv1.PointerState_POINTER_STATE_ACTIVE || rb.Receipt.Move != catalogv1.PointerMove_POINTER_MOVE_ROLLBACK || rb.Receipt.PreviousGeneration != 3 {
		t.Fatalf("rollback: %v %v", rb.Pointer, rb.Receipt)
	}
	gens, _, _ := f.st.ListGenerations(ctx, "inv", "a.b", 0, 10)
	if gens[0].State != retired || gens[2].State != eligible || !gens[2].Active {
		t.Fatalf("after rollback: %v", gens)
	}
	// Nothing older is fresh: the pointer closes.
	cl, err := f.st.Rollback(ctx, "inv", "a.b", 1, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if cl.Pointer.State != discoveryv1.PointerState_POINTER_STATE_CLOSED || cl.Receipt.Move != catalogv1.PointerMove_POINTER_MOVE_CLOSE {
		t.Fatalf("close: %v %v", cl.Pointer, cl.Receipt)
	}
	if _, err := f.st.Rollback(ctx, "inv", "a.b", 1, 0, ""); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("rollback of a closed pointer: %v", err)
	}
	// A new proven scan reopens it with the next number, never a reused one.
	v := f.view(t, "inv", "a.b")
	if v.Generation != 1 || v.LastGeneration != 3 {
		t.Fatalf("view of the closed pointer: %+v", v)
	}
	c, err := f.commit(t, "inv", "a.b", "r4", v, time.Hour)
	if err != nil || c.Pointer.Generation != 4 || c.Pointer.State != discoveryv1.PointerState_POINTER_STATE_ACTIVE {
		t.Fatalf("reopen: %v %v", c, err)
	}
	// The snapshot was written under the generation the CAS created, with
	// the digest of that generation.
	snap, total, err := f.st.Snapshot(ctx, "inv", "a.b", 4, 0, 0)
	if err != nil || total != 3 || snap.Generation != 4 || snap.SnapshotDigest != c.Receipt.SnapshotDigest {
		t.Fatalf("reopened snapshot: %v %d %v", snap, total, err)
	}
	if d, err := candidate.SnapshotDigest(snap, eligible); err != nil || d != snap.SnapshotDigest {
		t.Fatalf("reopened snapshot digest %s, recomputed %s (%v)", snap.SnapshotDigest, d, err)
	}
	gens, _, _ = f.st.ListGenerations(ctx, "inv", "a.b", 0, 10)
	if len(gens) != 4 || gens[0].Generation != 4 || !gens[0].Active || gens[3].State != retired {
		t.Fatalf("after reopening: %v", gens)
	}
}

func TestRetentionKeepsActiveFreshAndBoundGenerations(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	commit := func(rev string, ttl time.Duration) {
		if _, err := f.commit(t, "inv", "a.b", rev, f.view(t, "inv", "a.b"), ttl); err != nil {
			t.Fatal(err)
		}
	}
	commit("r1", -time.Hour) // 1: expired
	commit("r2", -time.Hour) // 2: expired, bound
	commit("r3", time.Hour)  // 3: fresh
	commit("r4", -time.Hour) // 4: expired but active
	if _, err := f.st.Bind(ctx, "inv", "a.b", 2, "agent-run-1", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Bind(ctx, "inv", "a.b", 99, "agent-run-1", time.Now().Add(time.Hour)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("binding an unknown generation: %v", err)
	}
	now := time.Now()
	gone, err := f.st.Retain(ctx, now, now, now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(gone) != 1 || gone[0].Generation != 1 {
		t.Fatalf("deleted %v, want only generation 1", gone)
	}
	// Once the binding ends, generation 2 goes too; 3 (fresh) and 4 (active) stay.
	later := now.Add(2 * time.Hour)
	gone, err = f.st.Retain(ctx, later, now, now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(gone) != 1 || gone[0].Generation != 2 {
		t.Fatalf("deleted %v, want generation 2", gone)
	}
	gens, _, _ := f.st.ListGenerations(ctx, "inv", "a.b", 0, 10)
	if len(gens) != 2 || gens[0].Generation != 4 || gens[1].Generation != 3 {
		t.Fatalf("kept %v", gens)
	}
	if _, _, err := f.st.Snapshot(ctx, "inv", "a.b", 1, 0, 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted snapshot still readable: %v", err)
	}
	// Old runs go too, unless a retained snapshot came from them.
	lone := f.run(t, "inv", "a.b")
	if err := f.st.FinishRun(ctx, lone, store.RunEnd{State: catalogv1.DiscoveryState_DISCOVERY_STATE_INCOMPLETE}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Retain(ctx, later, now, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.GetRun(ctx, lone, false); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("old run kept: %v", err)
	}
	runs, _, _ := f.st.ListRuns(ctx, store.RunFilter{}, nil, 100)
	if len(runs) != 2 {
		t.Fatalf("%d runs kept, want the 2 whose snapshots are retained", len(runs))
	}
}

func TestMarkLostEndsUnfinishedRuns(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	old := f.run(t, "inv", "a.b")
	cur := f.run(t, "inv", "a.b")
	other := f.run(t, "inv", "x.y")
	n, err := f.st.MarkLost(ctx, "inv", "a.b", cur)
	if err != nil || n != 1 {
		t.Fatalf("marked %d (%v)", n, err)
	}
	r, _ := f.st.GetRun(ctx, old, false)
	if r.State != catalogv1.DiscoveryState_DISCOVERY_STATE_INCOMPLETE || r.Reason != discoveryv1.RunReason_RUN_REASON_WORKER_LOST || r.FinishedAt == nil {
		t.Fatalf("lost run: %v", r)
	}
	for _, id := range []string{cur, other} {
		if r, _ := f.st.GetRun(ctx, id, false); r.FinishedAt != nil {
			t.Fatalf("run %s was ended", id)
		}
	}
}

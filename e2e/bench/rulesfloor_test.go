package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/platform/canonical"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/revision"
)

// rulesFloor is the least the rules let any discovery do for the same
// fleet, where [floor] is the least any crawler could do: per server, a
// bare go-sdk client reads every page and then the first page again (the
// closing re-check, I2: a catalog is proven whole only when both carry the
// same source revision), digests each tool's definition (what admission
// pins, I4), and commits the snapshot durably (I3: immutable snapshots,
// the pointer moved by compare-and-swap, the change in the gap-free,
// commit-ordered log Watch follows): one snapshot row, one row per tool,
// the pointer's CAS and one change-log revision taken from a counter row,
// in one transaction. Commits waiting at the same time share one
// transaction and one round trip (a group commit, as discovery's), at most
// two groups in flight, on a fresh database of the same Postgres. No run
// records, receipts, page records, identity pins, queue jobs, schema
// validation or registry reads: the gap between discovery and this floor
// is what those and discovery's own code cost.
//
// Its recorded form adds the records the rules name beside
// the snapshot: I1's "source revision, page root, pointer and catalog
// receipt" in the commit's transaction, and the discovery runs and pages
// DESIGN §1 keeps. Each scan inserts its run row at its start (reading the
// pointer's generation, which its commit's CAS expects); every page's
// source revision is read and must equal the first page's, the closing
// re-check's too (I2); each page's digest is kept; the group's one round
// trip also writes each snapshot's source revision and page root (a digest
// over its page digests), its run's page rows, its catalog receipt
// (change-log revision, run, source revision, page root) and ends its run.
// Still no queue jobs, identity pins, schema validation or registry reads.
//
// Its queued form adds the queue DESIGN §6 names ("scans are jobs in
// Postgres ... one scan per (server, audience_class) at a time"): each
// server's scan is a job row, inserted when it is asked for (by 8 callers,
// one insert each, committed, as the bench asks discovery), taken by a
// fetcher in batches (FOR UPDATE SKIP LOCKED, as many as there are
// crawlers, woken in-process by each insert) and completed in its commit's
// group transaction; a partial unique index keeps one job per pair queued
// or running. No retries, backoff, periodic refresh or cross-process wake
// (each of those the rules name too, and none is measured).
//
// Its checked form adds I1's registry reads and first-use pin and §4's raw
// tools, canonical digests and catalog checks: see checkedfloor_test.go.
type rulesFloorStore struct {
	url  string
	pool *pgxpool.Pool
	form floorForm

	mu       sync.Mutex
	pending  []*floorCommit
	flushers int
}

// floorForm is how much of what the rules name a rules floor does.
type floorForm int

const (
	// rulesOnly: the snapshot, its tools, the pointer's CAS and one
	// change-log revision.
	rulesOnly floorForm = iota
	// recordedForm: and the records the rules name beside the snapshot.
	recordedForm
	// queuedForm: and each scan a job in a Postgres queue.
	queuedForm
	// checkedForm: and I1's registry reads and pin, §4's raw tools,
	// canonical digests and checks.
	checkedForm
)

// recorded says the floor writes the records the rules name.
func (s *rulesFloorStore) recorded() bool { return s.form >= recordedForm }

// queued says the floor runs each scan as a queue job.
func (s *rulesFloorStore) queued() bool { return s.form >= queuedForm }

// checked says the floor reads the registry, keeps raw tools and checks
// them.
func (s *rulesFloorStore) checked() bool { return s.form == checkedForm }

func (f floorForm) String() string {
	return [...]string{"rules", "recorded", "queued", "checked"}[f]
}

// floorCommit is one server's snapshot waiting for its group.
type floorCommit struct {
	server string
	// job is the queued form's job, completed with the commit.
	job     int64
	names   []string
	digests []string
	// The recorded form's: the run, the source revision, each page's
	// digest and the page root.
	run         int64
	revision    string
	pageDigests []string
	pageRoot    string
	// The checked form's: each tool's input schema digest and raw JSON,
	// what the scan read at its start, the identity it observed and the
	// trust configuration's digest.
	inputs   []string
	raws     [][]byte
	scan     floorScan
	identity string
	trust    string
	done     chan error
}

func newRulesFloorStore(ctx context.Context, t *testing.T, form floorForm) *rulesFloorStore {
	t.Helper()
	url := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `
CREATE TABLE floor_counter (id boolean PRIMARY KEY DEFAULT true CHECK (id), revision bigint NOT NULL);
INSERT INTO floor_counter VALUES (true, 0);
CREATE TABLE floor_pointers (server_id text PRIMARY KEY, generation bigint NOT NULL, revision bigint NOT NULL);
CREATE TABLE floor_snapshots (server_id text NOT NULL, generation bigint NOT NULL, tool_count int NOT NULL,
  committed_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (server_id, generation));
`+recordedTables(form >= recordedForm)+queueTables(form >= queuedForm)+`
CREATE TABLE floor_tools (server_id text NOT NULL, generation bigint NOT NULL, ordinal int NOT NULL, name text NOT NULL,
  descriptor_digest text NOT NULL, PRIMARY KEY (server_id, generation, ordinal),
  FOREIGN KEY (server_id, generation) REFERENCES floor_snapshots);
CREATE TABLE floor_changes (revision bigint PRIMARY KEY, server_id text NOT NULL, generation bigint NOT NULL,
  committed_at timestamptz NOT NULL DEFAULT now());
`+checkedTables(form == checkedForm)); err != nil {
		t.Fatal(err)
	}
	return &rulesFloorStore{url: url, pool: pool, form: form}
}

// queueTables is the queued form's queue: a job per scan, one per server
// queued or running at a time, the available ones indexed for the fetcher.
func queueTables(queued bool) string {
	if !queued {
		return ""
	}
	return `CREATE TABLE floor_jobs (id bigserial PRIMARY KEY, server_id text NOT NULL, state text NOT NULL DEFAULT 'available',
  attempt int NOT NULL DEFAULT 0, created_at timestamptz NOT NULL DEFAULT now(), attempted_at timestamptz, finalized_at timestamptz);
CREATE UNIQUE INDEX floor_jobs_pair ON floor_jobs (server_id) WHERE state IN ('available', 'running');
CREATE INDEX floor_jobs_available ON floor_jobs (id) WHERE state = 'available';
`
}

// enqueue inserts server's scan job, committed; a job of the server already
// queued or running is an error here (each server is asked for once).
func (s *rulesFloorStore) enqueue(ctx context.Context, server string) error {
	ct, err := s.pool.Exec(ctx, `INSERT INTO floor_jobs (server_id) VALUES ($1)
ON CONFLICT (server_id) WHERE state IN ('available', 'running') DO NOTHING`, server)
	if err == nil && ct.RowsAffected() != 1 {
		err = fmt.Errorf("rules floor: a job of %s is queued already", server)
	}
	return err
}

// floorJob is one server to crawl: its index in the fleet and, in the
// queued form, the job taken for it.
type floorJob struct {
	index  int
	id     int64
	server string
}

// take marks up to limit available jobs running, oldest first, and returns
// them.
func (s *rulesFloorStore) take(ctx context.Context, limit int) ([]floorJob, error) {
	rows, err := s.pool.Query(ctx, `UPDATE floor_jobs j SET state = 'running', attempt = j.attempt + 1, attempted_at = now()
FROM (SELECT id FROM floor_jobs WHERE state = 'available' ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED) a
WHERE j.id = a.id RETURNING j.id, j.server_id`, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (floorJob, error) {
		var j floorJob
		return j, r.Scan(&j.id, &j.server)
	})
}

// recordedTables is the recorded form's schema: the snapshot's source
// revision and page root, runs, their pages, catalog receipts.
func recordedTables(recorded bool) string {
	if !recorded {
		return ""
	}
	return `ALTER TABLE floor_snapshots ADD COLUMN source_revision text NOT NULL, ADD COLUMN page_root text NOT NULL;
CREATE TABLE floor_runs (run_id bigserial PRIMARY KEY, server_id text NOT NULL, state text NOT NULL DEFAULT 'RUNNING',
  started_at timestamptz NOT NULL DEFAULT now(), finished_at timestamptz, expected_generation bigint NOT NULL,
  generation bigint, pages int);
CREATE TABLE floor_run_pages (run_id bigint NOT NULL REFERENCES floor_runs, page int NOT NULL, source_revision text NOT NULL,
  page_digest text NOT NULL, PRIMARY KEY (run_id, page));
CREATE TABLE floor_receipts (revision bigint PRIMARY KEY, server_id text NOT NULL, generation bigint NOT NULL,
  run_id bigint NOT NULL, source_revision text NOT NULL, page_root text NOT NULL,
  committed_at timestamptz NOT NULL DEFAULT now());`
}

// start records a scan's run and returns it with the pointer's generation
// it found, which its commit's CAS expects (I1: what a scan recorded at its
// start is unchanged at its commit): one statement, committed. (Not
// waiting for it on disk — synchronous_commit off for its transaction —
// measured the same here: 0.84 against 0.87 s, 2026-12-04.)
func (s *rulesFloorStore) start(ctx context.Context, server string) (run, expected int64, err error) {
	err = s.pool.QueryRow(ctx, `INSERT INTO floor_runs (server_id, expected_generation)
SELECT $1, coalesce((SELECT generation FROM floor_pointers WHERE server_id = $1), 0) RETURNING run_id, expected_generation`,
		server).Scan(&run, &expected)
	return run, expected, err
}

// commit stores one server's first snapshot (generation 1) and returns once
// its group committed.
func (s *rulesFloorStore) commit(ctx context.Context, c *floorCommit) error {
	c.done = make(chan error, 1)
	s.mu.Lock()
	s.pending = append(s.pending, c)
	start := s.flushers < 2
	if start {
		s.flushers++
	}
	s.mu.Unlock()
	if start {
		go s.flush()
	}
	select {
	case err := <-c.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *rulesFloorStore) flush() {
	for {
		s.mu.Lock()
		batch := s.pending[:min(len(s.pending), 256)]
		if len(batch) == 0 {
			s.flushers--
			s.mu.Unlock()
			return
		}
		s.pending = s.pending[len(batch):len(s.pending):len(s.pending)]
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := s.write(ctx, batch)
		cancel()
		for _, c := range batch {
			c.done <- err
		}
	}
}

// write is one group's transaction, one round trip: the snapshots, their
// tools, the pointers' CAS (a first commit inserts; the conflict is the CAS
// failing), and one change-log revision per snapshot from the counter row,
// in the group's order. A pointer that moved fails the group.
func (s *rulesFloorStore) write(ctx context.Context, batch []*floorCommit) error {
	var (
		servers         = make([]string, len(batch))
		counts          = make([]int32, len(batch))
		tc              floorToolColumns
		n               = len(batch)
		inserted, moved int64
	)
	for i, c := range batch {
		servers[i], counts[i] = c.server, int32(len(c.names))
		for j := range c.names {
			tc.servers, tc.ordinals = append(tc.servers, c.server), append(tc.ordinals, int32(j))
			tc.names, tc.digests = append(tc.names, c.names[j]), append(tc.digests, c.digests[j])
			if s.checked() {
				tc.inputs, tc.raws = append(tc.inputs, c.inputs[j]), append(tc.raws, c.raws[j])
			}
		}
	}
	var b *pgx.Batch
	if s.recorded() {
		b = s.recordedWrite(batch, servers, counts, tc, &inserted, &moved)
	} else {
		b = &pgx.Batch{}
		b.Queue(`INSERT INTO floor_snapshots (server_id, generation, tool_count) SELECT s, 1, c FROM unnest($1::text[], $2::int[]) AS u(s, c)`, servers, counts).
			Exec(func(ct pgconn.CommandTag) error { inserted = ct.RowsAffected(); return nil })
		queueTools(b, tc)
		b.Queue(`WITH r AS (UPDATE floor_counter SET revision = revision + $2 RETURNING revision),
ch AS (INSERT INTO floor_changes (revision, server_id, generation)
  SELECT r.revision - $2 + u.i, u.s, 1 FROM r, unnest($1::text[]) WITH ORDINALITY AS u(s, i) RETURNING revision, server_id)
INSERT INTO floor_pointers (server_id, generation, revision) SELECT server_id, 1, revision FROM ch
ON CONFLICT (server_id) DO NOTHING`, servers, n).
			Exec(func(ct pgconn.CommandTag) error { moved = ct.RowsAffected(); return nil })
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	if inserted != int64(n) || moved != int64(n) {
		return fmt.Errorf("rules floor: %d snapshots and %d pointers of %d written", inserted, moved, n)
	}
	return nil
}

// floorToolColumns is a group's tools, one array per column; inputs and
// raws only in the checked form.
type floorToolColumns struct {
	servers        []string
	ordinals       []int32
	names, digests []string
	inputs         []string
	raws           [][]byte
}

// queueTools queues the insert of a group's tools (after their snapshots:
// the rows reference them), the same in every form but the checked, which
// adds each tool's input schema digest and raw JSON.
func queueTools(b *pgx.Batch, tc floorToolColumns) {
	if tc.raws != nil {
		b.Queue(`INSERT INTO floor_tools (server_id, generation, ordinal, name, descriptor_digest, input_schema_digest, raw)
SELECT s, 1, o, n, d, i, r FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::text[], $6::bytea[]) AS u(s, o, n, d, i, r)`,
			tc.servers, tc.ordinals, tc.names, tc.digests, tc.inputs, tc.raws)
		return
	}
	b.Queue(`INSERT INTO floor_tools (server_id, generation, ordinal, name, descriptor_digest)
SELECT s, 1, o, n, d FROM unnest($1::text[], $2::int[], $3::text[], $4::text[]) AS u(s, o, n, d)`, tc.servers, tc.ordinals, tc.names, tc.digests)
}

// recordedWrite is the recorded form's group: the snapshots with their
// source revision and page root, their tools, their runs' pages, the
// pointers' CAS against the generation each run found at its start, one
// change-log revision and one catalog receipt per snapshot, and each run
// ended, in one round trip and one transaction.
func (s *rulesFloorStore) recordedWrite(batch []*floorCommit, servers []string, counts []int32, tc floorToolColumns,
	inserted, moved *int64) *pgx.Batch {
	n := len(batch)
	var (
		runs                 = make([]int64, n)
		revisions, roots     = make([]string, n), make([]string, n)
		pageCounts           = make([]int32, n)
		pageRuns             []int64
		pageNos              []int32
		pageRevs, pageDigest []string
	)
	for i, c := range batch {
		runs[i], revisions[i], roots[i], pageCounts[i] = c.run, c.revision, c.pageRoot, int32(len(c.pageDigests))
		for j, d := range c.pageDigests {
			pageRuns, pageNos = append(pageRuns, c.run), append(pageNos, int32(j))
			pageRevs, pageDigest = append(pageRevs, c.revision), append(pageDigest, d)
		}
	}
	b := &pgx.Batch{}
	countInserted := func(ct pgconn.CommandTag) error { *inserted = ct.RowsAffected(); return nil }
	if s.checked() {
		s.checkedSnapshots(b, batch, servers, counts, revisions, roots, countInserted)
	} else {
		b.Queue(`INSERT INTO floor_snapshots (server_id, generation, tool_count, source_revision, page_root)
SELECT s, 1, c, r, p FROM unnest($1::text[], $2::int[], $3::text[], $4::text[]) AS u(s, c, r, p)`, servers, counts, revisions, roots).
			Exec(countInserted)
	}
	queueTools(b, tc)
	b.Queue(`INSERT INTO floor_run_pages (run_id, page, source_revision, page_digest)
SELECT * FROM unnest($1::bigint[], $2::int[], $3::text[], $4::text[])`, pageRuns, pageNos, pageRevs, pageDigest)
	// A first commit's CAS is the pointer's insert (a run that found
	// generation 0 expects none; ON CONFLICT is the CAS failing).
	b.Queue(`WITH r AS (UPDATE floor_counter SET revision = revision + $2 RETURNING revision),
u AS (SELECT * FROM unnest($1::text[], $3::bigint[], $4::text[], $5::text[]) WITH ORDINALITY AS u(s, run, rev, root, i)),
ch AS (INSERT INTO floor_changes (revision, server_id, generation)
  SELECT r.revision - $2 + u.i, u.s, 1 FROM r, u RETURNING revision, server_id),
rc AS (INSERT INTO floor_receipts (revision, server_id, generation, run_id, source_revision, page_root)
  SELECT ch.revision, ch.server_id, 1, u.run, u.rev, u.root FROM ch JOIN u ON u.s = ch.server_id)
INSERT INTO floor_pointers (server_id, generation, revision) SELECT server_id, 1, revision FROM ch
ON CONFLICT (server_id) DO NOTHING`, servers, n, runs, revisions, roots).
		Exec(func(ct pgconn.CommandTag) error { *moved = ct.RowsAffected(); return nil })
	b.Queue(`UPDATE floor_runs SET state = 'ACTIVATED', finished_at = now(), generation = 1, pages = u.p
FROM unnest($1::bigint[], $2::int[]) AS u(id, p) WHERE run_id = u.id AND expected_generation = 0`, runs, pageCounts).
		Exec(func(ct pgconn.CommandTag) error {
			if ct.RowsAffected() != int64(n) {
				return fmt.Errorf("rules floor: %d runs of %d ended", ct.RowsAffected(), n)
			}
			return nil
		})
	if s.queued() {
		jobs := make([]int64, n)
		for i, c := range batch {
			jobs[i] = c.job
		}
		b.Queue(`UPDATE floor_jobs SET state = 'completed', finalized_at = now() WHERE id = ANY($1) AND state = 'running'`, jobs).
			Exec(func(ct pgconn.CommandTag) error {
				if ct.RowsAffected() != int64(n) {
					return fmt.Errorf("rules floor: %d jobs of %d completed", ct.RowsAffected(), n)
				}
				return nil
			})
	}
	return b
}

// rulesFloor crawls and commits the fleet as [rulesFloorStore] says, 32
// servers at a time (as [floor]); it returns the wall time, the pages read
// (re-checks included), the tools committed and the CPU of its database's
// Postgres backends.
func rulesFloor(ctx context.Context, t *testing.T, urls []string, form floorForm) (took time.Duration, pages, tools int, pgCPU float64, err error) {
	store := newRulesFloorStore(ctx, t, form)
	if store.checked() {
		if err := store.register(ctx, urls); err != nil {
			t.Fatal(err)
		}
	}
	pg := newPGMeter(ctx, t, store.url)
	defer func() { pgCPU = pg.since(ctx, t) }()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: floorConcurrency}}
	defer hc.CloseIdleConnections()
	// A failure cancels the crawl (not the meter's context).
	crawlCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
		cancel()
	}
	next := make(chan floorJob)
	start := time.Now()
	for range floorConcurrency {
		wg.Go(func() {
			for j := range next {
				p, n, err := crawlAndCommit(crawlCtx, hc, store, j, urls[j.index])
				mu.Lock()
				pages, tools = pages+p, tools+n
				mu.Unlock()
				if err != nil {
					fail(err)
				}
			}
		})
	}
	if store.queued() {
		store.feed(crawlCtx, len(urls), next, fail)
	} else {
		for i := range urls {
			next <- floorJob{index: i, server: floorServer(i)}
		}
	}
	close(next)
	wg.Wait()
	took = time.Since(start)
	if len(errs) > 0 {
		return took, pages, tools, 0, fmt.Errorf("rules floor: %d of %d servers failed, first: %w", len(errs), len(urls), errs[0])
	}
	return took, pages, tools, 0, nil
}

// floorServer is the rules floor's name of the i-th server.
func floorServer(i int) string { return fmt.Sprintf("srv-%05d", i) }

// feed is the queued form's way to the crawlers: 8 callers insert one job
// per server (as the bench's 8 callers ask discovery for a scan of each),
// and a fetcher takes the available jobs in batches of up to as many as
// there are crawlers, waiting for an insert when none is available, and
// hands each to the next free crawler, until every server's job was taken.
func (s *rulesFloorStore) feed(ctx context.Context, servers int, next chan<- floorJob, fail func(error)) {
	wake := make(chan struct{}, 1)
	enqueued := make(chan struct{})
	var callers sync.WaitGroup
	for w := range 8 {
		callers.Go(func() {
			for i := w; i < servers; i += 8 {
				if err := s.enqueue(ctx, floorServer(i)); err != nil {
					fail(fmt.Errorf("enqueue %s: %w", floorServer(i), err))
					return
				}
				select {
				case wake <- struct{}{}:
				default:
				}
			}
		})
	}
	go func() { callers.Wait(); close(enqueued) }()
	defer func() { <-enqueued }()
	index := make(map[string]int, servers)
	for i := range servers {
		index[floorServer(i)] = i
	}
	done := false
	for taken := 0; taken < servers; {
		jobs, err := s.take(ctx, floorConcurrency)
		if err != nil {
			fail(fmt.Errorf("take jobs: %w", err))
			return
		}
		if len(jobs) == 0 {
			if done {
				fail(fmt.Errorf("rules floor: %d of %d jobs taken, none left", taken, servers))
				return
			}
			select {
			case <-wake:
			case <-enqueued:
				done = true // one more take sees every insert
			case <-ctx.Done():
				return
			}
			continue
		}
		for _, j := range jobs {
			j.index = index[j.server]
			select {
			case next <- j:
				taken++
			case <-ctx.Done():
				return
			}
		}
	}
}

var (
	errRecheckDiffers = errors.New("the closing re-check's first page differs from the walk's")
	errRevisionMoved  = errors.New("a page's source revision differs from the first page's")
	errListChanged    = errors.New("the server sent tools/list_changed during the scan")
	errNoRevision     = errors.New("the first page carries no source revision (I2: nothing to prove the catalog whole against)")
)

// pageRevision is the source catalog revision a tools/list result carries.
func pageRevision(res *mcp.ListToolsResult) string {
	if res.Meta == nil {
		return ""
	}
	v, _ := res.Meta[revision.MetaKey].(string)
	return v
}

// crawlAndCommit lists one server to the end, reads its first page again,
// digests its tools and commits them.
func crawlAndCommit(ctx context.Context, hc *http.Client, store *rulesFloorStore, j floorJob, url string) (pages, tools int, err error) {
	server := j.server
	c := &floorCommit{server: server, job: j.id}
	if store.recorded() {
		var expected int64
		if store.checked() {
			c.run, expected, c.scan, err = store.startChecked(ctx, server)
		} else {
			c.run, expected, err = store.start(ctx, server)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("start %s: %w", server, err)
		}
		if expected != 0 {
			return 0, 0, fmt.Errorf("start %s: a pointer at generation %d already", server, expected)
		}
	}
	var transport mcp.Transport = &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}
	var raw *rawResults
	if store.checked() {
		raw = &rawResults{Transport: transport}
		transport = raw
	}
	// The checked form hears list_changed during the scan (I2: one ends
	// the scan incomplete); a handler makes the go-sdk subscribe to it
	// (under 2026-07-28, a subscriptions/listen stream per session).
	var changed atomic.Bool
	var opts *mcp.ClientOptions
	if store.checked() {
		opts = &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed.Store(true) }}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "toolcrib-bench-rules-floor", Version: "v1"}, opts)
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("connect %s: %w", url, err)
	}
	defer cs.Close()
	if store.checked() {
		// A plain-HTTP server's identity is its URL's digest (a TLS
		// server's would be its certificate's); a pinned server must show
		// the identity pinned.
		c.identity = canonical.DigestBytes([]byte(url))
		if c.scan.pin != "" && c.scan.pin != c.identity {
			return 0, 0, fmt.Errorf("%s: identity %s, pinned %s", server, c.identity, c.scan.pin)
		}
		c.trust = c.scan.trustDigest(server, c.identity)
	}
	var (
		names, digests []string
		first          listedPage
		seen           = map[string]bool{}
	)
	params := &mcp.ListToolsParams{}
	for {
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			return pages, len(names), fmt.Errorf("tools/list %s page %d: %w", url, pages, err)
		}
		lp, err := listed(res, raw)
		if err != nil {
			return pages, len(names), fmt.Errorf("tools/list %s page %d: %w", url, pages, err)
		}
		if pages == 0 {
			first, c.revision = lp, lp.revision
			if store.recorded() && c.revision == "" {
				return pages, len(names), errNoRevision
			}
		} else if store.recorded() && lp.revision != c.revision {
			return pages, len(names), errRevisionMoved
		}
		pages++
		page := sha256.New()
		for i := range lp.count() {
			var name, d string
			if raw != nil {
				ft, err := checkTool(lp.raw.Tools[i], seen)
				if err != nil {
					return pages, len(names), err
				}
				name, d = ft.name, ft.digest
				c.inputs, c.raws = append(c.inputs, ft.input), append(c.raws, ft.raw)
			} else {
				b, err := json.Marshal(lp.tools[i])
				if err != nil {
					return pages, len(names), err
				}
				sum := sha256.Sum256(b)
				name, d = lp.tools[i].Name, "sha256:"+hex.EncodeToString(sum[:])
			}
			names, digests = append(names, name), append(digests, d)
			if store.recorded() {
				page.Write([]byte(d))
			}
		}
		if store.recorded() {
			c.pageDigests = append(c.pageDigests, "sha256:"+hex.EncodeToString(page.Sum(nil)))
		}
		if lp.cursor == "" {
			break
		}
		params.Cursor = lp.cursor
	}
	res, err := cs.ListTools(ctx, &mcp.ListToolsParams{})
	if err != nil {
		return pages, len(names), fmt.Errorf("tools/list %s closing re-check: %w", url, err)
	}
	pages++
	again, err := listed(res, raw)
	if err != nil {
		return pages, len(names), fmt.Errorf("tools/list %s closing re-check: %w", url, err)
	}
	if !again.same(first) || (store.recorded() && again.revision != c.revision) {
		return pages, len(names), errRecheckDiffers
	}
	if changed.Load() {
		return pages, len(names), errListChanged
	}
	c.names, c.digests = names, digests
	if store.recorded() {
		root := sha256.New()
		for _, d := range c.pageDigests {
			root.Write([]byte(d))
		}
		c.pageRoot = "sha256:" + hex.EncodeToString(root.Sum(nil))
	}
	return pages, len(names), store.commit(ctx, c)
}

// listedPage is one tools/list page as a floor reads it: the go-sdk's typed
// result, or (the checked form) the raw result decoded once.
type listedPage struct {
	revision, cursor string
	tools            []*mcp.Tool
	raw              *rawPage
}

// listed reads the page res answered; with raw, from the raw result
// captured beneath it.
func listed(res *mcp.ListToolsResult, raw *rawResults) (listedPage, error) {
	if raw == nil {
		return listedPage{revision: pageRevision(res), cursor: res.NextCursor, tools: res.Tools}, nil
	}
	var p rawPage
	b := raw.take()
	if b == nil {
		return listedPage{}, errors.New("no raw result captured")
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return listedPage{}, err
	}
	return listedPage{revision: p.revision(), cursor: p.NextCursor, raw: &p}, nil
}

func (p listedPage) count() int {
	if p.raw != nil {
		return len(p.raw.Tools)
	}
	return len(p.tools)
}

// same says the closing re-check's page lists the tools the walk's first
// page did (by name; the checked form byte for byte).
func (p listedPage) same(first listedPage) bool {
	if p.count() != first.count() {
		return false
	}
	for i := range p.count() {
		if p.raw != nil {
			if !bytes.Equal(p.raw.Tools[i], first.raw.Tools[i]) {
				return false
			}
		} else if p.tools[i].Name != first.tools[i].Name {
			return false
		}
	}
	return true
}

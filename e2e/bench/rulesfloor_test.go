package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/platform/pgtest"
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
type rulesFloorStore struct {
	url  string
	pool *pgxpool.Pool

	mu       sync.Mutex
	pending  []*floorCommit
	flushers int
}

// floorCommit is one server's snapshot waiting for its group.
type floorCommit struct {
	server  string
	names   []string
	digests []string
	done    chan error
}

func newRulesFloorStore(ctx context.Context, t *testing.T) *rulesFloorStore {
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
CREATE TABLE floor_tools (server_id text NOT NULL, generation bigint NOT NULL, ordinal int NOT NULL, name text NOT NULL,
  descriptor_digest text NOT NULL, PRIMARY KEY (server_id, generation, ordinal),
  FOREIGN KEY (server_id, generation) REFERENCES floor_snapshots);
CREATE TABLE floor_changes (revision bigint PRIMARY KEY, server_id text NOT NULL, generation bigint NOT NULL,
  committed_at timestamptz NOT NULL DEFAULT now());`); err != nil {
		t.Fatal(err)
	}
	return &rulesFloorStore{url: url, pool: pool}
}

// commit stores one server's first snapshot (generation 1) and returns once
// its group committed.
func (s *rulesFloorStore) commit(ctx context.Context, server string, names, digests []string) error {
	c := &floorCommit{server: server, names: names, digests: digests, done: make(chan error, 1)}
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
		toolServers     []string
		ordinals        []int32
		names, digests  []string
		n               = len(batch)
		inserted, moved int64
	)
	for i, c := range batch {
		servers[i], counts[i] = c.server, int32(len(c.names))
		for j := range c.names {
			toolServers, ordinals = append(toolServers, c.server), append(ordinals, int32(j))
			names, digests = append(names, c.names[j]), append(digests, c.digests[j])
		}
	}
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO floor_snapshots (server_id, generation, tool_count) SELECT s, 1, c FROM unnest($1::text[], $2::int[]) AS u(s, c)`, servers, counts).
		Exec(func(ct pgconn.CommandTag) error { inserted = ct.RowsAffected(); return nil })
	b.Queue(`INSERT INTO floor_tools (server_id, generation, ordinal, name, descriptor_digest)
SELECT s, 1, o, n, d FROM unnest($1::text[], $2::int[], $3::text[], $4::text[]) AS u(s, o, n, d)`, toolServers, ordinals, names, digests)
	b.Queue(`WITH r AS (UPDATE floor_counter SET revision = revision + $2 RETURNING revision),
ch AS (INSERT INTO floor_changes (revision, server_id, generation)
  SELECT r.revision - $2 + u.i, u.s, 1 FROM r, unnest($1::text[]) WITH ORDINALITY AS u(s, i) RETURNING revision, server_id)
INSERT INTO floor_pointers (server_id, generation, revision) SELECT server_id, 1, revision FROM ch
ON CONFLICT (server_id) DO NOTHING`, servers, n).
		Exec(func(ct pgconn.CommandTag) error { moved = ct.RowsAffected(); return nil })
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	if inserted != int64(n) || moved != int64(n) {
		return fmt.Errorf("rules floor: %d snapshots and %d pointers of %d written", inserted, moved, n)
	}
	return nil
}

// rulesFloor crawls and commits the fleet as [rulesFloorStore] says, 32
// servers at a time (as [floor]); it returns the wall time, the pages read
// (re-checks included), the tools committed and the CPU of its database's
// Postgres backends.
func rulesFloor(ctx context.Context, t *testing.T, urls []string) (took time.Duration, pages, tools int, pgCPU float64, err error) {
	store := newRulesFloorStore(ctx, t)
	pg := newPGMeter(ctx, t, store.url)
	defer func() { pgCPU = pg.since(ctx, t) }()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: floorConcurrency}}
	defer hc.CloseIdleConnections()
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	next := make(chan int)
	start := time.Now()
	for range floorConcurrency {
		wg.Go(func() {
			for i := range next {
				p, n, err := crawlAndCommit(ctx, hc, store, fmt.Sprintf("srv-%05d", i), urls[i])
				mu.Lock()
				pages, tools = pages+p, tools+n
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		})
	}
	for i := range urls {
		next <- i
	}
	close(next)
	wg.Wait()
	took = time.Since(start)
	if len(errs) > 0 {
		return took, pages, tools, 0, fmt.Errorf("rules floor: %d of %d servers failed, first: %w", len(errs), len(urls), errs[0])
	}
	return took, pages, tools, 0, nil
}

var errRecheckDiffers = errors.New("the closing re-check's first page differs from the walk's")

// crawlAndCommit lists one server to the end, reads its first page again,
// digests its tools and commits them.
func crawlAndCommit(ctx context.Context, hc *http.Client, store *rulesFloorStore, server, url string) (pages, tools int, err error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "toolcrib-bench-rules-floor", Version: "v1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("connect %s: %w", url, err)
	}
	defer cs.Close()
	var names, digests []string
	var first []*mcp.Tool
	params := &mcp.ListToolsParams{}
	for {
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			return pages, len(names), fmt.Errorf("tools/list %s page %d: %w", url, pages, err)
		}
		if pages == 0 {
			first = res.Tools
		}
		pages++
		for _, tool := range res.Tools {
			b, err := json.Marshal(tool)
			if err != nil {
				return pages, len(names), err
			}
			sum := sha256.Sum256(b)
			names, digests = append(names, tool.Name), append(digests, "sha256:"+hex.EncodeToString(sum[:]))
		}
		if res.NextCursor == "" {
			break
		}
		params.Cursor = res.NextCursor
	}
	again, err := cs.ListTools(ctx, &mcp.ListToolsParams{})
	if err != nil {
		return pages, len(names), fmt.Errorf("tools/list %s closing re-check: %w", url, err)
	}
	pages++
	if len(again.Tools) != len(first) {
		return pages, len(names), errRecheckDiffers
	}
	for i := range first {
		if again.Tools[i].Name != first[i].Name {
			return pages, len(names), errRecheckDiffers
		}
	}
	return pages, len(names), store.commit(ctx, server, names, digests)
}

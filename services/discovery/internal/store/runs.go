package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/services/discovery/crawl"
	"github.com/toolcrib/toolcrib/services/discovery/validate"
)

// NewRun starts a run.
type NewRun struct {
	ScanID        string
	Attempt       int
	ServerID      string
	AudienceClass string
	// TenantID and PolicyEpoch are the audience class's tenant and its
	// policy epoch as the scan read them before starting the run: a
	// running run is visible to its tenant's users (ListRuns, GetRun) from
	// its first row, with no update of its own. Empty and 0 when the
	// registry read failed (the run's end says why).
	TenantID    string
	PolicyEpoch int64
	Trigger     discoveryv1.ScanTrigger
	Worker      string
	// SuppressedNotifications and NotificationDelay are what the rate
	// limit of notification-triggered scans held back (see the Run
	// message).
	SuppressedNotifications int
	NotificationDelay       time.Duration
	// MarkLost first ends every unfinished run of the pair as INCOMPLETE
	// WORKER_LOST, in the same statement (see [Store.MarkLost]).
	MarkLost bool
}

// StartRun records a run in DISCOVERING and returns its id.
func (s *Store) StartRun(ctx context.Context, r NewRun) (string, error) {
	id := newUUID()
	rows, err := s.pool.Query(ctx, startRunSQL, startRunArgs(id, r)...)
	if err != nil {
		return "", fmt.Errorf("store: start run: %w", err)
	}
	lost, err := collectLost(rows)
	if err != nil {
		return "", fmt.Errorf("store: start run: %w", err)
	}
	s.ended(lost...)
	return id, nil
}

// Session is a connection a scan holds for its whole duration (its pair's
// advisory lock lives and dies with it); *pgxpool.Conn and *pgx.Conn are.
type Session interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// StartScan takes the pair's session advisory lock lockKey on conn, and
// only when it got it starts the run (as [Store.StartRun]) in the same
// statement and reads [Store.View] of the pair, all in one round trip: a
// scan holding the pair's lock reads where the pointer is (its CAS
// expectation) as it starts its run. locked is false when another session
// holds the lock: nothing was written then (a view may have been read;
// it means nothing). The caller releases the lock with
// pg_advisory_unlock(lockKey) on conn, also after an error (the lock may
// be held then), or closes conn.
func (s *Store) StartScan(ctx context.Context, conn Session, lockKey int64, r NewRun) (id string, view ScanView, locked bool, err error) {
	id = newUUID()
	var lost []*EndedRun
	var b pgx.Batch
	b.Queue(startScanSQL, append(startRunArgs(id, r), lockKey)...).Query(func(rows pgx.Rows) error {
		var err error
		locked, lost, err = collectLocked(rows)
		return err
	})
	b.Queue(viewSQL, r.ServerID, r.AudienceClass).QueryRow(func(row pgx.Row) error {
		var err error
		view, err = scanView(row)
		return err
	})
	if err := conn.SendBatch(ctx, &b).Close(); err != nil {
		return "", ScanView{}, false, fmt.Errorf("store: start scan: %w", err)
	}
	if !locked {
		return "", ScanView{}, false, nil
	}
	s.ended(lost...)
	return id, view, true, nil
}

// startScanSQL is [startRunSQL] gated by pg_try_advisory_lock($13), taken
// once (a materialized CTE) before either write: it returns one row with
// the lock's outcome, then the columns of each run it ended lost.
const startScanSQL = `WITH l AS MATERIALIZED (SELECT pg_try_advisory_lock($13) AS ok),
lost AS (
  UPDATE runs SET state = 'INCOMPLETE', reason = 'WORKER_LOST', finished_at = now(), detail = ` + lostDetail + `
  WHERE (SELECT ok FROM l) AND $9 AND server_id = $4 AND audience_class = $5 AND finished_at IS NULL
  RETURNING ` + lostColumns + `),
started AS (
  INSERT INTO runs (run_id, scan_id, attempt, server_id, audience_class, tenant_id, state, trigger, worker,
    suppressed_notifications, notification_delay_ms, policy_epoch)
  SELECT $1::uuid, $2::text, $3::integer, $4::text, $5::text, $6::text, 'DISCOVERING', $7::text, $8::text, $10::integer,
    $11::bigint, $12::bigint FROM l WHERE l.ok)
SELECT l.ok, lost.* FROM l LEFT JOIN lost ON true`

// collectLocked reads a [startScanSQL] result.
func collectLocked(rows pgx.Rows) (bool, []*EndedRun, error) {
	var locked bool
	var lost []*EndedRun
	_, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct{}, error) {
		var id, server, aud *string
		var pages, tools *int
		var secs *float64
		if err := r.Scan(&locked, &id, &server, &aud, &pages, &tools, &secs); err != nil {
			return struct{}{}, err
		}
		if id != nil {
			lost = append(lost, lostRun(*id, *server, *aud, *pages, *tools, *secs))
		}
		return struct{}{}, nil
	})
	return locked, lost, err
}

// startRunSQL inserts a run in DISCOVERING and, when $9, first ends every
// unfinished run of the pair as WORKER_LOST, returning those.
const startRunSQL = `WITH lost AS (
  UPDATE runs SET state = 'INCOMPLETE', reason = 'WORKER_LOST', finished_at = now(), detail = ` + lostDetail + `
  WHERE $9 AND server_id = $4 AND audience_class = $5 AND finished_at IS NULL
  RETURNING ` + lostColumns + `),
started AS (
  INSERT INTO runs (run_id, scan_id, attempt, server_id, audience_class, tenant_id, state, trigger, worker,
    suppressed_notifications, notification_delay_ms, policy_epoch)
  VALUES ($1,$2,$3,$4,$5,$6,'DISCOVERING',$7,$8,$10,$11,$12))
SELECT * FROM lost`

func startRunArgs(id string, r NewRun) []any {
	return []any{id, r.ScanID, max(r.Attempt, 1), r.ServerID, r.AudienceClass, r.TenantID, triggerName(r.Trigger), r.Worker, r.MarkLost,
		max(r.SuppressedNotifications, 0), max(r.NotificationDelay.Milliseconds(), 0), max(r.PolicyEpoch, 0)}
}

const lostDetail = `'the worker running this scan stopped before it finished (' || worker || '); the scan was retried'`

// lostColumns are what a WORKER_LOST update returns for [collectLost].
const lostColumns = `run_id::text, server_id, audience_class, page_count, tool_count, extract(epoch FROM finished_at - started_at)::float8`

func collectLost(rows pgx.Rows) ([]*EndedRun, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*EndedRun, error) {
		var id, server, aud string
		var pages, tools int
		var secs float64
		err := r.Scan(&id, &server, &aud, &pages, &tools, &secs)
		return lostRun(id, server, aud, pages, tools, secs), err
	})
}

// MarkLost ends every unfinished run of the pointer, except except, as
// INCOMPLETE WORKER_LOST: their worker stopped without finishing them. The
// caller must hold the pointer's scan lock, so no live run is among them.
func (s *Store) MarkLost(ctx context.Context, serverID, audienceClass, except string) (int64, error) {
	rows, err := s.pool.Query(ctx, `UPDATE runs SET state = 'INCOMPLETE', reason = 'WORKER_LOST', finished_at = now(),
detail = `+lostDetail+`
WHERE server_id = $1 AND audience_class = $2 AND finished_at IS NULL AND run_id::text <> $3
RETURNING `+lostColumns, serverID, audienceClass, except)
	if err != nil {
		return 0, fmt.Errorf("store: mark lost runs: %w", err)
	}
	lost, err := collectLost(rows)
	if err != nil {
		return 0, fmt.Errorf("store: mark lost runs: %w", err)
	}
	s.ended(lost...)
	return int64(len(lost)), nil
}

// UpdateRun records the state of an unfinished run while it is still
// going (a large catalog's VALIDATING and SNAPSHOT_PROVEN; what else the run
// learns is written with its end).
func (s *Store) UpdateRun(ctx context.Context, runID string, state catalogv1.DiscoveryState) error {
	_, err := s.pool.Exec(ctx, `UPDATE runs SET state = $2 WHERE run_id = $1 AND finished_at IS NULL`, runID, stateName(state))
	if err != nil {
		return fmt.Errorf("store: update run: %w", err)
	}
	return nil
}

// RunEnd is a run's final record.
type RunEnd struct {
	State               catalogv1.DiscoveryState
	Reason              discoveryv1.RunReason
	Detail              string
	TenantID            string
	ProtocolVersion     string
	SourceRevision      string
	ClosingRevision     string
	PageRoot            string
	ToolCount           int
	Bytes               int64
	PolicyEpoch         int64
	Generation          int64
	ConfirmedGeneration int64
	IdentityDigest      string
	TrustConfigDigest   string
	CacheScope          string
	Flags               []validate.Flag
	Pages               []crawl.Page
}

type storedFlag struct {
	Tool   string `json:"tool_name"`
	Flag   string `json:"flag"`
	Detail string `json:"detail"`
}

// FinishRun records a run's end outside a commit.
func (s *Store) FinishRun(ctx context.Context, runID string, e RunEnd) error {
	var ended *EndedRun
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		ended, err = finishRun(ctx, tx, runID, e)
		return err
	})
	if err == nil {
		s.ended(ended)
	}
	return err
}

// finishRun writes the run's final state and its pages in tx and returns
// what an [Observer] hears of it once tx committed. A run that already
// finished (e.g. marked lost by another worker) is left alone (nil).
func finishRun(ctx context.Context, tx pgx.Tx, runID string, e RunEnd) (*EndedRun, error) {
	var b pgx.Batch
	f, err := queueFinishRun(&b, runID, e)
	if err != nil {
		return nil, err
	}
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return nil, err
	}
	return f.rest(ctx, tx)
}

// finishing is a run's end queued in a batch by [queueFinishRun].
type finishing struct {
	runID string
	e     RunEnd
	ended *EndedRun
	// matched says the update found the run unfinished.
	matched bool
}

// queueFinishRun queues the statement that writes the run's final state
// (and its pages, when at most [inlineRows]) in b; once b was sent,
// [finishing.rest] writes larger page sets and returns the ended run.
func queueFinishRun(b *pgx.Batch, runID string, e RunEnd) (*finishing, error) {
	f, args, err := finishRunArgs(runID, e)
	if err != nil {
		return nil, err
	}
	sql := finishRunSQL
	if inlinePages(e) {
		sql = finishRunPagesSQL
	}
	b.Queue(sql, args...).QueryRow(func(row pgx.Row) error {
		var server, aud *string
		var secs *float64
		if err := row.Scan(&server, &aud, &secs); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			return fmt.Errorf("store: finish run: %w", err)
		}
		f.matchedAs(server, aud, secs)
		return nil
	})
	return f, nil
}

// finishRunArgs is the run's end and the arguments of [finishRunSQL]
// ($1–$19), followed by those of [runPagesSQL] ($20–$28) when the run's
// pages go inline.
func finishRunArgs(runID string, e RunEnd) (*finishing, []any, error) {
	flags := make([]storedFlag, len(e.Flags))
	for i, f := range e.Flags {
		flags[i] = storedFlag{Tool: f.Tool, Flag: f.Flag, Detail: f.Detail}
	}
	fj, err := json.Marshal(flags)
	if err != nil {
		return nil, nil, err
	}
	f := &finishing{runID: runID, e: e, ended: &EndedRun{RunID: runID, State: e.State, Reason: e.Reason, Pages: len(e.Pages), Tools: e.ToolCount,
		Generation: max(e.Generation, e.ConfirmedGeneration)}}
	args := []any{runID, stateName(e.State), reasonName(e.Reason), e.Detail, e.TenantID, e.ProtocolVersion,
		e.SourceRevision, e.ClosingRevision, e.PageRoot, len(e.Pages), e.ToolCount, e.Bytes,
		e.PolicyEpoch, e.Generation, e.ConfirmedGeneration, e.IdentityDigest, e.TrustConfigDigest, e.CacheScope, fj}
	if inlinePages(e) {
		args = append(args, pageColumns(e.Pages)...)
	}
	return f, args, nil
}

// matchedAs records what the run's end statement returned: the run's pair
// and duration when the update matched, all nil when the run had already
// finished.
func (f *finishing) matchedAs(server, aud *string, secs *float64) {
	if server == nil || aud == nil || secs == nil {
		return
	}
	f.matched = true
	f.ended.ServerID, f.ended.AudienceClass = *server, *aud
	f.ended.Took = time.Duration(*secs * float64(time.Second))
}

func inlinePages(e RunEnd) bool { return len(e.Pages) > 0 && len(e.Pages) <= inlineRows }

// rest writes the pages the queued statement did not (more than
// [inlineRows]) and returns the ended run, nil when the run had already
// finished.
func (f *finishing) rest(ctx context.Context, tx pgx.Tx) (*EndedRun, error) {
	if !f.matched {
		return nil, nil
	}
	e := f.e
	if len(e.Pages) == 0 || inlinePages(e) {
		return f.ended, nil
	}
	rows := make([][]any, len(e.Pages))
	for i, p := range e.Pages {
		rows[i] = []any{f.runID, p.Index, p.CursorIn, p.CursorOut, p.HasNext, p.Revision, p.ToolCount, p.Digest, p.Bytes, p.ReceivedAt}
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"run_pages"},
		[]string{"run_id", "idx", "cursor_in", "cursor_out", "has_next", "revision", "tool_count", "page_digest", "bytes", "received_at"},
		pgx.CopyFromRows(rows)); err != nil {
		return nil, fmt.Errorf("store: run pages: %w", err)
	}
	return f.ended, nil
}

// finishRunSet ends an unfinished run ($1) with the record $2–$19; its
// WHERE clause comes last, so that a commit can add a condition.
const finishRunSet = `UPDATE runs SET state = $2, reason = $3, detail = $4, finished_at = now(),
tenant_id = CASE WHEN $5 = '' THEN tenant_id ELSE $5 END,
protocol_version = CASE WHEN $6 = '' THEN protocol_version ELSE $6 END,
source_revision = $7, closing_revision = $8, page_root = $9, page_count = $10, tool_count = $11, bytes = $12,
policy_epoch = CASE WHEN $13 = 0 THEN policy_epoch ELSE $13 END, generation = $14, confirmed_generation = $15,
identity_digest = CASE WHEN $16 = '' THEN identity_digest ELSE $16 END,
trust_config_digest = CASE WHEN $17 = '' THEN trust_config_digest ELSE $17 END,
cache_scope = $18, flags = $19
WHERE run_id = $1 AND finished_at IS NULL`

// finishRunReturning is what the run's end returns: its pair and duration.
const finishRunReturning = `
RETURNING server_id, audience_class, extract(epoch FROM finished_at - started_at)::float8 AS took`

// finishRunSQL ends an unfinished run ($1) with the record $2–$19.
const finishRunSQL = finishRunSet + finishRunReturning

// runPagesSQL writes the run's pages ($20–$28, one array per column) when
// the statement's CTE ended has a row (the update matched).
const runPagesSQL = `INSERT INTO run_pages (run_id, idx, cursor_in, cursor_out, has_next, revision, tool_count, page_digest, bytes, received_at)
SELECT $1, p.* FROM unnest($20::integer[], $21::text[], $22::text[], $23::boolean[], $24::text[], $25::integer[], $26::text[],
  $27::bigint[], $28::timestamptz[]) AS p
WHERE EXISTS (SELECT 1 FROM ended)`

// finishRunPagesSQL is [finishRunSQL] that also writes the run's pages.
const finishRunPagesSQL = `WITH ended AS (` + finishRunSQL + `),
pages AS (` + runPagesSQL + `)
SELECT * FROM ended`

// pageColumns is the pages as one array per run_pages column (after
// run_id), in the order of [runPagesSQL].
func pageColumns(pages []crawl.Page) []any {
	n := len(pages)
	idx, tools := make([]int32, n), make([]int32, n)
	in, out, rev, digest := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	next, size, at := make([]bool, n), make([]int64, n), make([]time.Time, n)
	for i, p := range pages {
		idx[i], in[i], out[i], next[i], rev[i] = int32(p.Index), p.CursorIn, p.CursorOut, p.HasNext, p.Revision
		tools[i], digest[i], size[i], at[i] = int32(p.ToolCount), p.Digest, p.Bytes, p.ReceivedAt
	}
	return []any{idx, in, out, next, rev, tools, digest, size, at}
}

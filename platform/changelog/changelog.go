package changelog

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolcrib/toolcrib/platform/postgres"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations is the migration set that creates the log's tables; add it to
// the owning service's [postgres.Migrate] call.
func Migrations() postgres.Set {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err) // embedded directory always exists
	}
	return postgres.Set{Name: "changelog", FS: sub}
}

// ErrCompacted is returned when a watcher resumes from a revision whose
// successors are no longer all kept.
var ErrCompacted = errors.New("changelog: revision compacted")

// Entry is one committed change.
type Entry struct {
	// Revision is gapless and in commit order, from 1.
	Revision int64
	// CommittedAt is the transaction time of the change.
	CommittedAt time.Time
	// Kind is the writer's label for the payload.
	Kind string
	// Payload is the writer's encoding of the change.
	Payload []byte
	// Tenants are the tenants whose principals may see the change on Watch;
	// empty when only platform admins and services may.
	Tenants []string
}

// ErrAhead is returned when a watcher resumes from a revision the log has
// not reached, e.g. after the database was restored from an older backup.
var ErrAhead = errors.New("changelog: revision ahead of the log")

// Log is the change log in one schema.
type Log struct {
	pool    *pgxpool.Pool
	channel string
	logger  *slog.Logger

	mu      sync.Mutex
	waiters map[chan struct{}]struct{}
}

// New returns the log of the pool's schema. channel is the NOTIFY channel,
// unique per schema (e.g. `registry_changes`).
func New(pool *pgxpool.Pool, channel string, logger *slog.Logger) *Log {
	return &Log{pool: pool, channel: channel, logger: logger, waiters: map[chan struct{}]struct{}{}}
}

// Logger is the logger the log was made with, for the writers that append
// to it.
func (l *Log) Logger() *slog.Logger { return l.logger }

// appendSQL takes the next revision (queueing on the counter row until the
// transaction ends), inserts the change and queues its NOTIFY, in one
// statement: one round trip inside the section that every writer of the
// log passes one at a time.
const appendSQL = `WITH r AS (UPDATE change_counter SET revision = revision + 1 RETURNING revision)
INSERT INTO changes (revision, kind, payload, tenants) SELECT revision, $1, $2, $3 FROM r
RETURNING revision, committed_at, pg_notify($4, revision::text)::text`

// Append records a change in tx and returns its revision. tenants are the
// tenants whose principals may see the change on Watch (nil: only platform
// admins and services). Every writer queues on the counter row until tx
// ends, which is what keeps revisions in commit order; keep the
// transactions that append short, and append as late in them as possible
// (see [Log.QueueAppendMany], which appends many changes in one statement
// queued with the statements that need their revisions).
func (l *Log) Append(ctx context.Context, tx pgx.Tx, kind string, payload []byte, tenants []string) (int64, time.Time, error) {
	var (
		rev    int64
		at     time.Time
		notify string
	)
	if err := tx.QueryRow(ctx, appendSQL, kind, payload, nonNil(tenants), l.channel).Scan(&rev, &at, &notify); err != nil {
		return 0, time.Time{}, fmt.Errorf("changelog: append: %w", err)
	}
	return rev, at, nil
}

// Change is one change of [Log.QueueAppendMany].
type Change struct {
	Kind    string
	Payload []byte
	// Tenants are the tenants whose principals may see the change on
	// Watch (nil: only platform admins and services).
	Tenants []string
	// Revision, when set, receives the change's revision when the batch
	// is sent.
	Revision *int64
}

// appendManySQL is [appendSQL] for n changes ($5): the counter moves by n
// once, the changes take the n revisions up to it in the order given
// (kinds $1, payloads $2, tenants $3 as one JSON array per change: a
// Postgres array must be rectangular), and one NOTIFY is queued. It returns
// the last revision.
const appendManySQL = `WITH r AS (UPDATE change_counter SET revision = revision + $5 RETURNING revision),
ins AS (INSERT INTO changes (revision, kind, payload, tenants)
  SELECT r.revision - $5 + e.ord, e.kind, e.payload, ARRAY(SELECT jsonb_array_elements_text(e.tenants::jsonb))
  FROM r, unnest($1::text[], $2::bytea[], $3::text[]) WITH ORDINALITY AS e(kind, payload, tenants, ord)
  RETURNING 1)`

// appendManyResult is the end of [appendManySQL]'s statement.
const appendManyResult = `
SELECT r.revision, (SELECT count(*) FROM ins), pg_notify($4, r.revision::text)::text FROM r`

// QueueAppendMany queues on b the appends of changes, in order, as one
// statement: n consecutive revisions taken with one move of the counter
// row, and one NOTIFY. Statements queued after it read the last revision
// as [HeadQuery]; change i of n has that revision - n + 1 + i.
func (l *Log) QueueAppendMany(b *pgx.Batch, changes []*Change) error {
	return l.QueueAppendManyWith(b, changes, "")
}

// QueueAppendManyWith is [Log.QueueAppendMany] with more writes in the
// same statement: with is one or more CTEs ("name AS (...)", separated by
// commas) that read the last revision as (SELECT revision FROM r) and take
// args as $6, $7, and so on. A writer holds the counter row from its
// append to its commit, and every statement it sends in between lengthens
// that hold; writes stamped with their revisions belong in the append's
// own statement.
func (l *Log) QueueAppendManyWith(b *pgx.Batch, changes []*Change, with string, args ...any) error {
	n := len(changes)
	if n == 0 {
		return nil
	}
	kinds, payloads, tenants := make([]string, n), make([][]byte, n), make([]string, n)
	for i, c := range changes {
		tj, err := json.Marshal(nonNil(c.Tenants))
		if err != nil {
			return fmt.Errorf("changelog: append: %w", err)
		}
		kinds[i], payloads[i], tenants[i] = c.Kind, c.Payload, string(tj)
	}
	sql := appendManySQL + appendManyResult
	if with != "" {
		sql = appendManySQL + ",\n" + with + appendManyResult
	}
	b.Queue(sql, append([]any{kinds, payloads, tenants, l.channel, n}, args...)...).QueryRow(func(row pgx.Row) error {
		var last, inserted int64
		var notify string
		if err := row.Scan(&last, &inserted, &notify); err != nil {
			return fmt.Errorf("changelog: append: %w", err)
		}
		if inserted != int64(n) {
			return fmt.Errorf("changelog: append: %d of %d changes inserted", inserted, n)
		}
		for i, c := range changes {
			if c.Revision != nil {
				*c.Revision = last - int64(n) + 1 + int64(i)
			}
		}
		return nil
	})
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Head returns the newest committed revision; 0 when the log is empty.
func (l *Log) Head(ctx context.Context) (int64, error) {
	var rev int64
	err := l.pool.QueryRow(ctx, "SELECT revision FROM change_counter").Scan(&rev)
	return rev, err
}

// Oldest returns the revision of the oldest change still kept, or head+1
// when none is kept: watching from Oldest()-1 sends every change kept.
func (l *Log) Oldest(ctx context.Context) (int64, error) {
	var rev int64
	err := l.pool.QueryRow(ctx, `SELECT coalesce((SELECT min(revision) FROM changes),
	(SELECT revision + 1 FROM change_counter))`).Scan(&rev)
	return rev, err
}

// HeadQuery selects the newest committed revision (visible to the
// statement's snapshot); a read that must return its revision in the same
// round trip embeds it as a scalar subquery.
const HeadQuery = "SELECT revision FROM change_counter"

// HeadTx returns the newest revision visible to tx, for lists that return the
// revision to watch from.
func HeadTx(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (int64, error) {
	var rev int64
	err := q.QueryRow(ctx, HeadQuery).Scan(&rev)
	return rev, err
}

// Read returns up to limit entries with revision > after, in order. It
// returns [ErrCompacted] when entries after `after` were deleted.
func (l *Log) Read(ctx context.Context, after int64, limit int) ([]Entry, error) {
	rows, err := l.pool.Query(ctx, `SELECT revision, committed_at, kind, payload, tenants FROM changes
WHERE revision > $1 ORDER BY revision LIMIT $2`, after, limit)
	if err != nil {
		return nil, err
	}
	entries, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Entry, error) {
		var e Entry
		err := r.Scan(&e.Revision, &e.CommittedAt, &e.Kind, &e.Payload, &e.Tenants)
		return e, err
	})
	if err != nil {
		return nil, err
	}
	if len(entries) > 0 && entries[0].Revision != after+1 {
		return nil, fmt.Errorf("%w: asked for changes after %d, oldest kept is %d", ErrCompacted, after, entries[0].Revision)
	}
	if len(entries) == 0 {
		// Nothing after `after`. In one snapshot: if the head is past it,
		// those entries were deleted.
		var head int64
		var oldest *int64
		if err := l.pool.QueryRow(ctx, `SELECT c.revision, (SELECT min(revision) FROM changes WHERE revision > $1)
FROM change_counter c`, after).Scan(&head, &oldest); err != nil {
			return nil, err
		}
		if head > after && (oldest == nil || *oldest != after+1) {
			return nil, fmt.Errorf("%w: asked for changes after %d, head is %d and they are no longer kept", ErrCompacted, after, head)
		}
	}
	return entries, nil
}

// Compact deletes entries committed before olderThan, always keeping the
// newest keepAtLeast entries. It returns how many were deleted.
func (l *Log) Compact(ctx context.Context, olderThan time.Time, keepAtLeast int) (int64, error) {
	tag, err := l.pool.Exec(ctx, `DELETE FROM changes WHERE committed_at < $1
AND revision <= (SELECT revision FROM change_counter) - $2`, olderThan, keepAtLeast)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// Listen keeps a LISTEN connection open until ctx ends, waking watchers on
// every notification. It reconnects after errors; watchers still poll on
// every heartbeat, so a gap while reconnecting delays them, never loses a
// change.
func (l *Log) Listen(ctx context.Context) {
	for ctx.Err() == nil {
		err := l.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		l.logger.WarnContext(ctx, "change log listener lost its connection; reconnecting", "channel", l.channel, "error", err)
		l.wake()
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (l *Log) listenOnce(ctx context.Context) error {
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		return err
	}
	defer func() {
		// Leave the pooled connection clean.
		_, _ = conn.Exec(context.WithoutCancel(ctx), "UNLISTEN *")
	}()
	l.wake() // anything committed before LISTEN took effect
	for {
		if _, err := conn.Conn().WaitForNotification(ctx); err != nil {
			return err
		}
		l.wake()
	}
}

// Notify returns a channel that receives when new changes may have
// committed (a NOTIFY arrived, or the listener reconnected), and a function
// that stops it. Run [Log.Listen] in the same process for it to fire.
func (l *Log) Notify() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	l.mu.Lock()
	l.waiters[ch] = struct{}{}
	l.mu.Unlock()
	return ch, func() {
		l.mu.Lock()
		delete(l.waiters, ch)
		l.mu.Unlock()
	}
}

func (l *Log) wake() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for ch := range l.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

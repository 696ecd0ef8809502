package store

import (
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/postgres"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Schema is discovery's Postgres schema.
const Schema = "discovery"

// Migrations are discovery's own migration set (the change log's comes from
// package changelog; River's from rivermigrate).
func Migrations() postgres.Set {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err)
	}
	return postgres.Set{Name: "discovery", FS: sub}
}

// Sets are every SQL migration set of the schema, in order.
func Sets() []postgres.Set { return []postgres.Set{changelog.Migrations(), Migrations()} }

// Sentinel errors; see the package doc.
var (
	ErrNotFound    = errors.New("store: not found")
	ErrCASConflict = errors.New("store: the pointer moved")
	ErrNotFresh    = errors.New("store: the generation has expired")
	ErrClosed      = errors.New("store: the pointer is closed")
)

// ChangeKind is the change-log kind of pointer changes.
const ChangeKind = "pointer"

// Store is discovery's storage.
type Store struct {
	pool *pgxpool.Pool
	log  *changelog.Log
	now  func() time.Time
	obs  Observer // nil: nobody listens
	// group forms the group transactions of scan commits (see group.go).
	group *grouper
}

// New returns a store on pool, appending pointer changes to log.
func New(pool *pgxpool.Pool, log *changelog.Log) *Store {
	s := &Store{pool: pool, log: log, now: time.Now}
	s.group = &grouper{s: s}
	return s
}

// Pool is the store's pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// stateName and stateValue convert discovery states to the stored names.
func stateName(s catalogv1.DiscoveryState) string {
	return strings.TrimPrefix(s.String(), "DISCOVERY_STATE_")
}

func stateValue(name string) catalogv1.DiscoveryState {
	return catalogv1.DiscoveryState(catalogv1.DiscoveryState_value["DISCOVERY_STATE_"+name])
}

func reasonName(r discoveryv1.RunReason) string {
	if r == discoveryv1.RunReason_RUN_REASON_UNSPECIFIED {
		return ""
	}
	return strings.TrimPrefix(r.String(), "RUN_REASON_")
}

func reasonValue(name string) discoveryv1.RunReason {
	if name == "" {
		return discoveryv1.RunReason_RUN_REASON_UNSPECIFIED
	}
	return discoveryv1.RunReason(discoveryv1.RunReason_value["RUN_REASON_"+name])
}

func triggerName(t discoveryv1.ScanTrigger) string {
	return strings.TrimPrefix(t.String(), "SCAN_TRIGGER_")
}

func triggerValue(name string) discoveryv1.ScanTrigger {
	return discoveryv1.ScanTrigger(discoveryv1.ScanTrigger_value["SCAN_TRIGGER_"+name])
}

func moveName(m catalogv1.PointerMove) string { return strings.TrimPrefix(m.String(), "POINTER_MOVE_") }

func moveValue(name string) catalogv1.PointerMove {
	return catalogv1.PointerMove(catalogv1.PointerMove_value["POINTER_MOVE_"+name])
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// appendChange appends a pointer change to the log in tx, and stamps the
// pointer row and the receipt with its revision.
func (s *Store) appendChange(ctx context.Context, tx pgx.Tx, ptr *discoveryv1.ActivePointer, rcpt *catalogv1.CatalogReceipt, reason string) (int64, error) {
	// From the append to the end of tx every other commit waits on the log's
	// counter row, so the append, the pointer's stamp and the receipt go in
	// one round trip (the two read the new revision from the counter).
	c := &pendingChange{ptr: ptr, rcpt: rcpt, reason: reason}
	var b pgx.Batch
	if err := s.queueChanges(&b, []*pendingChange{c}); err != nil {
		return 0, err
	}
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return 0, fmt.Errorf("store: append the pointer change: %w", err)
	}
	return c.rev, nil
}

// queueChanges queues on b, as one statement whatever their number (and
// one before it completing their queue jobs), the appends of pointer
// changes in order (consecutive revisions, see
// [changelog.Log.QueueAppendManyWith]), the stamp of each pointer row with
// its change's revision and the changes' receipts; each change's rev is
// set when b is sent. Change i of n has the counter's new revision - n + i.
func (s *Store) queueChanges(b *pgx.Batch, changes []*pendingChange) error {
	n := len(changes)
	if n == 0 {
		return nil
	}
	entries := make([]*changelog.Change, n)
	servers, classes := make([]string, n), make([]string, n)
	ids, runs, sources, roots, digests, moves, reasons := make([]string, n), make([]string, n), make([]string, n),
		make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	gens, prevs, epochs := make([]int64, n), make([]int64, n), make([]int64, n)
	accepted := make([]time.Time, n)
	for i, c := range changes {
		payload, err := proto.Marshal(&discoveryv1.PointerChange{Pointer: c.ptr, Receipt: c.rcpt})
		if err != nil {
			return err
		}
		entries[i] = &changelog.Change{Kind: ChangeKind, Payload: payload, Tenants: []string{c.ptr.GetTenantId()}, Revision: &c.rev}
		r := c.rcpt
		servers[i], classes[i] = c.ptr.GetServerId(), c.ptr.GetAudienceClass()
		ids[i], runs[i], sources[i], roots[i], digests[i] = r.GetReceiptId(), r.GetRunId(), r.GetSourceRevision(), r.GetPageRoot(), r.GetSnapshotDigest()
		moves[i], reasons[i] = moveName(r.GetMove()), c.reason
		gens[i], prevs[i], epochs[i], accepted[i] = r.GetGeneration(), r.GetPreviousGeneration(), r.GetPolicyEpoch(), r.GetAcceptedAt().AsTime()
	}
	var jobs []int64
	for _, c := range changes {
		if c.job != 0 {
			jobs = append(jobs, c.job)
		}
	}
	if len(jobs) > 0 {
		// Before the append: the counter row is held from the append on.
		b.Queue(completeJobsSQL, jobs)
	}
	// The pointers' and receipts' revisions in the append's own statement:
	// from the append on, the counter row is held until the commit.
	// A pair named twice (never by two successful commits of one group,
	// which the CAS forbids) is stamped with its later change.
	return s.log.QueueAppendManyWith(b, entries, `ptr AS (UPDATE pointers p SET revision = (SELECT revision FROM r) - $8 + u.ord
  FROM (SELECT DISTINCT ON (server_id, audience_class) server_id, audience_class, ord
    FROM unnest($6::text[], $7::text[]) WITH ORDINALITY AS u(server_id, audience_class, ord)
    ORDER BY server_id, audience_class, ord DESC) u
  WHERE p.server_id = u.server_id AND p.audience_class = u.audience_class),
rcpt AS (INSERT INTO receipts (receipt_id, server_id, audience_class, generation, previous_generation,
  source_revision, page_root, snapshot_digest, policy_epoch, accepted_at, run_id, move, reason, revision)
  SELECT x.id::uuid, x.server_id, x.audience_class, x.generation, x.previous_generation, x.source_revision, x.page_root,
    x.snapshot_digest, x.policy_epoch, x.accepted_at, x.run_id, x.move, x.reason, (SELECT revision FROM r) - $8 + x.ord
  FROM unnest($9::text[], $6::text[], $7::text[], $10::bigint[], $11::bigint[], $12::text[], $13::text[], $14::text[],
    $15::bigint[], $16::timestamptz[], $17::text[], $18::text[], $19::text[]) WITH ORDINALITY
    AS x(id, server_id, audience_class, generation, previous_generation, source_revision, page_root, snapshot_digest,
      policy_epoch, accepted_at, run_id, move, reason, ord))`,
		servers, classes, n, ids, gens, prevs, sources, roots, digests, epochs, accepted, runs, moves, reasons)
}

// DecodeChange decodes a change-log entry written by the store, filling in
// the revision.
func DecodeChange(e changelog.Entry) (*discoveryv1.PointerChange, error) {
	var c discoveryv1.PointerChange
	if err := proto.Unmarshal(e.Payload, &c); err != nil {
		return nil, fmt.Errorf("store: decode change %d: %w", e.Revision, err)
	}
	c.Revision = e.Revision
	if c.Pointer != nil {
		c.Pointer.Revision = e.Revision
	}
	return &c, nil
}

// completeJobsSQL completes the queue jobs of a group's commits in the
// group's last round trip: what the queue's own completion
// (river.JobCompleteTx, the queue's general statement, one round trip per
// commit) does for a job that succeeded, and no more: a job still running
// becomes completed at the transaction's time; one that is not running
// (cancelled, or taken back by the queue's rescuer) is left as it is, as
// the queue's statement leaves it. The queue's own completer, run when the
// worker returns, then finds it completed and changes nothing.
const completeJobsSQL = `UPDATE river_job SET state = 'completed', finalized_at = now()
WHERE id = ANY($1::bigint[]) AND state = 'running'`

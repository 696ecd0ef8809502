package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolcrib/toolcrib/revision/lease"
)

// FrozenError says issuance for the server is frozen.
type FrozenError struct {
	// Server is the server id.
	Server string
}

func (e *FrozenError) Error() string {
	return fmt.Sprintf("issuance for server %q is frozen", e.Server)
}

// ErrReceiptUsed says a lease was already recorded on the admission
// receipt (by this replica or another): a receipt is redeemed for at most
// one lease.
var ErrReceiptUsed = errors.New("store: a lease was already issued on this admission receipt")

// Target kinds of a revocation.
const (
	KindLease  = "lease"
	KindTool   = "tool"
	KindServer = "server"
	KindTenant = "tenant"
)

// Store is the lease service's store.
type Store struct {
	pool  *pgxpool.Pool
	group group
}

// New returns the store on pool (search_path = lease).
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Issued is one lease to record.
type Issued struct {
	// Claims are the lease's claims; Claims.ID, a UUID in its canonical
	// form, is also its execution receipt's id (migration 0006).
	Claims lease.Claims
	// KeyID is the key that signed it.
	KeyID string
}

// RecordIssue commits the execution receipt of a lease and returns its id
// (the lease id: a lease and its execution receipt share one), in a
// transaction that first checks, holding the server's freeze lock
// shared ([freezeLockKey]), that issuance is not frozen ([*FrozenError]):
// a Freeze that returned before is seen, one under way waits for this
// commit. It also claims the
// lease's admission receipt (Claims.Receipt): [ErrReceiptUsed] when an
// execution receipt already claims it, committed or committing (an
// insert racing another waits for it and loses if it commits). Only after it
// returns may the lease be handed out. Concurrent calls share one
// transaction (group commit, see group.go); each returns once its receipt
// is committed, or with ctx's error if ctx ends first (the receipt may
// still commit then, and the lease is simply never handed out). A caller
// that writes its own batch ([Store.flush]) returns when that batch ends,
// within flushTimeout, whatever ctx says: its client, which gave up at
// its own deadline, sees no difference. A lease id that is not a UUID in
// its canonical form is refused before anything is written.
func (s *Store) RecordIssue(ctx context.Context, in Issued) (string, error) {
	if id, err := uuid.Parse(in.Claims.ID); err != nil || id.String() != in.Claims.ID {
		return "", fmt.Errorf("store: lease id %q is not a UUID in its canonical form", in.Claims.ID)
	}
	p := &pendingIssue{in: in, done: make(chan error, 1)}
	if s.enqueue(p) {
		s.flush(p)
	}
	select {
	case err := <-p.done:
		if err != nil {
			return "", err
		}
		return in.Claims.ID, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Status is what the store knows against a lease.
type Status struct {
	// Revoked: a revocation of the lease, its tool, server or tenant took
	// effect at or after the lease was issued.
	Revoked bool
	// Frozen: issuance for its server is frozen now.
	Frozen bool
}

// Status reads, in one query, whether c is revoked and its server frozen.
func (s *Store) Status(ctx context.Context, c lease.Claims) (Status, error) {
	var st Status
	err := s.pool.QueryRow(ctx, `SELECT
  EXISTS (SELECT 1 FROM revocations WHERE effective_at >= $5 AND (
    (kind = 'lease' AND target = $1) OR (kind = 'tool' AND target = $2) OR
    (kind = 'server' AND target = $3) OR (kind = 'tenant' AND target = $4 AND $4 <> ''))),
  coalesce((SELECT frozen FROM freezes WHERE server_id = $3), false)`,
		c.ID, c.Tool, c.Server, c.Tenant, c.IssuedAt).Scan(&st.Revoked, &st.Frozen)
	return st, err
}

// Revoke records a revocation of every lease of target (kind one of the
// Kind constants) issued until now, and returns when it took effect.
func (s *Store) Revoke(ctx context.Context, kind, target, reason, by string) (time.Time, error) {
	var at time.Time
	err := s.pool.QueryRow(ctx, `INSERT INTO revocations (kind, target, reason, revoked_by) VALUES ($1, $2, $3, $4)
RETURNING effective_at`, kind, target, reason, by).Scan(&at)
	return at, err
}

// Freeze sets whether issuance for server is frozen and returns the state
// and when it last changed (unchanged when the state already was frozen).
func (s *Store) Freeze(ctx context.Context, server string, frozen bool, reason, by string) (bool, time.Time, error) {
	// One round trip, one implicit transaction: the server's freeze lock,
	// exclusive, then the row (see [freezeLockKey]).
	b := &pgx.Batch{}
	b.Queue(`SELECT pg_advisory_xact_lock($1)`, freezeLockKey(server))
	var at time.Time
	b.Queue(`INSERT INTO freezes (server_id, frozen, reason, changed_by, changed_at)
VALUES ($1, $2, $3, $4, clock_timestamp())
ON CONFLICT (server_id) DO UPDATE SET
  changed_at = CASE WHEN freezes.frozen = EXCLUDED.frozen THEN freezes.changed_at ELSE EXCLUDED.changed_at END,
  frozen = EXCLUDED.frozen, reason = EXCLUDED.reason, changed_by = EXCLUDED.changed_by
RETURNING changed_at`, server, frozen, reason, by).QueryRow(func(row pgx.Row) error { return row.Scan(&at) })
	err := s.pool.SendBatch(ctx, b).Close()
	return frozen, at, err
}

// AutoFreeze freezes issuance for server because of the discovery move at
// revision rev, accepted by discovery at acceptedAt, unless a move at rev or
// later was already acted on (by any replica) or the move predates this
// service (see migration 0002). It reports whether it froze; the cursor
// moves in the same transaction.
func (s *Store) AutoFreeze(ctx context.Context, server string, rev int64, acceptedAt time.Time, reason, by string) (bool, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var cursor int64
	var since time.Time
	if err := tx.QueryRow(ctx, `SELECT revision, since FROM discovery_freeze_cursor FOR UPDATE`).Scan(&cursor, &since); err != nil {
		return false, err
	}
	if rev <= cursor {
		return false, nil
	}
	act := !acceptedAt.Before(since)
	if act {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, freezeLockKey(server)); err != nil {
			return false, err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO freezes (server_id, frozen, reason, changed_by, changed_at)
VALUES ($1, true, $2, $3, clock_timestamp())
ON CONFLICT (server_id) DO UPDATE SET
  changed_at = CASE WHEN freezes.frozen THEN freezes.changed_at ELSE EXCLUDED.changed_at END,
  frozen = true, reason = EXCLUDED.reason, changed_by = EXCLUDED.changed_by`, server, reason, by); err != nil {
			return false, err
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE discovery_freeze_cursor SET revision = $1`, rev); err != nil {
		return false, err
	}
	return act, tx.Commit(ctx)
}

// FrozenCount is the number of servers whose issuance is frozen (a
// metric).
func (s *Store) FrozenCount(ctx context.Context) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM freezes WHERE frozen`).Scan(&n)
	return n, err
}

// ExecutionReceipt reads back the recorded lease id and admission receipt
// of an execution receipt (tests and audits); id is the execution
// receipt's id, which is its lease's id for every receipt recorded since
// migration 0006.
func (s *Store) ExecutionReceipt(ctx context.Context, id string) (leaseID, admissionReceipt string, err error) {
	err = s.pool.QueryRow(ctx, `SELECT lease_id, admission_receipt_id FROM execution_receipts WHERE receipt_id = $1`, id).
		Scan(&leaseID, &admissionReceipt)
	return leaseID, admissionReceipt, err
}

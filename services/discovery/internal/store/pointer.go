package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
)

// Rollback moves the pointer back (I10), by CAS from expected: to the
// generation `to` when it is not 0, else to the newest older generation
// that is still fresh. When none is fresh (and `to` is 0) the pointer is
// CLOSED. The current generation is retired; a reactivated one is
// un-retired. Receipt and change-log entry are written in the same
// transaction.
//
// Errors: [ErrNotFound] (no pointer, or `to` unknown / not older),
// [ErrCASConflict] (the pointer is not at expected), [ErrClosed] (the
// pointer is closed), [ErrNotFresh] (`to` has expired).
func (s *Store) Rollback(ctx context.Context, serverID, audienceClass string, expected, to int64, reason string) (*Committed, error) {
	var out *Committed
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		out, err = s.rollbackTx(ctx, tx, serverID, audienceClass, expected, to, reason)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.moved(out)
	return out, nil
}

// Close closes the pointer by CAS from expected (a CLOSE move: admission
// answers SERVER_CLOSED, the lease service freezes issuance for the
// server), by the same path as a [Store.Rollback] that finds no fresh
// generation: the current generation is retired, and receipt and
// change-log entry (with reason) are written in the same transaction.
//
// Errors: [ErrNotFound] (no pointer), [ErrCASConflict] (the pointer is not
// at expected), [ErrClosed] (the pointer is already closed).
func (s *Store) Close(ctx context.Context, serverID, audienceClass string, expected int64, reason string) (*Committed, error) {
	var out *Committed
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		out, err = s.moveBackTx(ctx, tx, serverID, audienceClass, expected, 0, true, reason)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.moved(out)
	return out, nil
}

// rollbackTx is [Store.Rollback] in tx; the caller calls s.moved after the
// commit.
func (s *Store) rollbackTx(ctx context.Context, tx pgx.Tx, serverID, audienceClass string, expected, to int64, reason string) (*Committed, error) {
	return s.moveBackTx(ctx, tx, serverID, audienceClass, expected, to, false, reason)
}

// moveBackTx is a rollback (closeOnly false) or a close (closeOnly true:
// no target is looked for, the pointer is CLOSED) in tx.
func (s *Store) moveBackTx(ctx context.Context, tx pgx.Tx, serverID, audienceClass string, expected, to int64, closeOnly bool, reason string) (*Committed, error) {
	var out *Committed
	err := func() error {
		var now time.Time
		if err := tx.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
			return err
		}
		var tenant, state string
		var cur int64
		err := tx.QueryRow(ctx, `SELECT tenant_id, generation, state FROM pointers WHERE server_id = $1 AND audience_class = $2 FOR UPDATE`,
			serverID, audienceClass).Scan(&tenant, &cur, &state)
		if errors.Is(err, pgx.ErrNoRows) {
			return &NotFoundError{Kind: KindActivePointer, ID: PointerID(serverID, audienceClass)}
		}
		if err != nil {
			return err
		}
		if cur != expected {
			return ErrCASConflict
		}
		if state == "CLOSED" {
			return ErrClosed
		}
		var target int64
		var fresh time.Time
		var snapState, srcRev, root, digest string
		var epoch int64
		q := `SELECT g.generation, g.fresh_until, s.state, s.source_revision, s.page_root, s.snapshot_digest, s.policy_epoch
FROM generations g JOIN snapshots s USING (server_id, audience_class, generation)
WHERE g.server_id = $1 AND g.audience_class = $2 AND g.generation < $3`
		args := []any{serverID, audienceClass, cur}
		if to > 0 {
			q += ` AND g.generation = $4`
			args = append(args, to)
		} else {
			q += ` AND g.fresh_until > $4 ORDER BY g.generation DESC LIMIT 1`
			args = append(args, now)
		}
		if closeOnly {
			err = pgx.ErrNoRows // nothing to move back to: close
		} else {
			err = tx.QueryRow(ctx, q, args...).Scan(&target, &fresh, &snapState, &srcRev, &root, &digest, &epoch)
		}
		switch {
		case errors.Is(err, pgx.ErrNoRows) && to > 0:
			return &NotFoundError{Kind: KindGeneration, ID: GenerationID(serverID, audienceClass, to)}
		case errors.Is(err, pgx.ErrNoRows):
			target = 0
		case err != nil:
			return err
		case !fresh.After(now):
			return ErrNotFresh
		}
		if _, err := tx.Exec(ctx, `UPDATE generations SET retired_at = $4
WHERE server_id = $1 AND audience_class = $2 AND generation = $3 AND retired_at IS NULL`, serverID, audienceClass, cur, now); err != nil {
			return err
		}
		ptr := &discoveryv1.ActivePointer{ServerId: serverID, AudienceClass: audienceClass, TenantId: tenant, MovedAt: timestamppb.New(now)}
		rcpt := &catalogv1.CatalogReceipt{ReceiptId: newUUID(), ServerId: serverID, AudienceClass: audienceClass,
			PreviousGeneration: cur, AcceptedAt: timestamppb.New(now)}
		if target > 0 {
			if _, err := tx.Exec(ctx, `UPDATE pointers SET generation = $3, state = 'ACTIVE', moved_at = $4, fresh_until = $5
WHERE server_id = $1 AND audience_class = $2`, serverID, audienceClass, target, now, fresh); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE generations SET retired_at = NULL
WHERE server_id = $1 AND audience_class = $2 AND generation = $3`, serverID, audienceClass, target); err != nil {
				return err
			}
			ptr.Generation, ptr.State, ptr.SnapshotState = target, discoveryv1.PointerState_POINTER_STATE_ACTIVE, stateValue(snapState)
			ptr.FreshUntil, ptr.SourceRevision, ptr.PageRoot = timestamppb.New(fresh), srcRev, root
			rcpt.Generation, rcpt.SourceRevision, rcpt.PageRoot, rcpt.SnapshotDigest, rcpt.PolicyEpoch = target, srcRev, root, digest, epoch
			rcpt.Move = catalogv1.PointerMove_POINTER_MOVE_ROLLBACK
		} else {
			var fu time.Time
			if err := tx.QueryRow(ctx, `UPDATE pointers SET state = 'CLOSED', moved_at = $3
WHERE server_id = $1 AND audience_class = $2 RETURNING fresh_until`, serverID, audienceClass, now).Scan(&fu); err != nil {
				return err
			}
			ptr.Generation, ptr.State = cur, discoveryv1.PointerState_POINTER_STATE_CLOSED
			ptr.FreshUntil = timestamppb.New(fu)
			rcpt.Generation = cur
			rcpt.Move = catalogv1.PointerMove_POINTER_MOVE_CLOSE
		}
		rev, err := s.appendChange(ctx, tx, ptr, rcpt, reason)
		if err != nil {
			return err
		}
		ptr.Revision = rev
		out = &Committed{Pointer: ptr, Receipt: rcpt}
		return nil
	}()
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Bind records that a live run uses a generation until boundUntil and
// returns the stored end (the later of the old and the new). [ErrNotFound]
// when the generation is not retained.
func (s *Store) Bind(ctx context.Context, serverID, audienceClass string, generation int64, runID string, boundUntil time.Time) (time.Time, error) {
	var until time.Time
	err := s.pool.QueryRow(ctx, `INSERT INTO bindings (server_id, audience_class, generation, run_id, bound_until)
SELECT $1, $2, $3, $4, $5 FROM generations WHERE server_id = $1 AND audience_class = $2 AND generation = $3
ON CONFLICT (server_id, audience_class, generation, run_id) DO UPDATE SET bound_until = greatest(bindings.bound_until, EXCLUDED.bound_until)
RETURNING bound_until`, serverID, audienceClass, generation, runID, boundUntil).Scan(&until)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, &NotFoundError{Kind: KindGeneration, ID: GenerationID(serverID, audienceClass, generation)}
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("store: bind: %w", err)
	}
	return until, nil
}

// Retained is one generation the retention sweep deleted.
type Retained struct {
	ServerID, AudienceClass string
	Generation              int64
}

// Retain deletes (I11) every generation that is not named by its pointer,
// whose freshness ended before `expiredBefore`, and that no live run is
// bound to (a binding ending after now). It also drops bindings that ended
// before expiredBefore, and runs (with their pages) that finished before
// runsBefore and produced no retained snapshot. The database trigger
// refuses to delete a pointer's generation whatever this query says.
func (s *Store) Retain(ctx context.Context, now, expiredBefore, runsBefore time.Time) ([]Retained, error) {
	var out []Retained
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL toolcrib.retention = 'on'"); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `DELETE FROM snapshots s
WHERE NOT EXISTS (SELECT 1 FROM pointers p WHERE p.server_id = s.server_id AND p.audience_class = s.audience_class AND p.generation = s.generation)
  AND EXISTS (SELECT 1 FROM generations g WHERE g.server_id = s.server_id AND g.audience_class = s.audience_class
              AND g.generation = s.generation AND g.fresh_until < $2)
  AND NOT EXISTS (SELECT 1 FROM bindings b WHERE b.server_id = s.server_id AND b.audience_class = s.audience_class
              AND b.generation = s.generation AND b.bound_until > $1)
RETURNING s.server_id, s.audience_class, s.generation`, now, expiredBefore)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Retained, error) {
			var x Retained
			err := r.Scan(&x.ServerID, &x.AudienceClass, &x.Generation)
			return x, err
		})
		if err != nil {
			return fmt.Errorf("store: retention: %w", err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM bindings WHERE bound_until < $1`, expiredBefore); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM runs r WHERE r.finished_at < $1
AND NOT EXISTS (SELECT 1 FROM snapshots s WHERE s.run_id = r.run_id)`, runsBefore)
		return err
	})
	return out, err
}

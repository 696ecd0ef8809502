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

// GuardPair is what the rollout guard needs about one ACTIVE pointer.
type GuardPair struct {
	ServerID, AudienceClass string
	// Generation is the active generation.
	Generation int64
	// Previous is the generation the active one replaced when its latest
	// move was an ACTIVATE (a proven scan); 0 when it was made active by a
	// rollback, or replaced nothing.
	Previous int64
	// ActivatedAt is when the active generation's latest ACTIVATE or
	// ROLLBACK move was accepted.
	ActivatedAt time.Time
	// ResumedAt is the latest operator resume of the pair; zero if none.
	ResumedAt time.Time
	// Held: an automatic move of the pair awaits an operator's resume.
	Held bool
	// Incidents are the ids of the pair's pending incidents, oldest first.
	Incidents []string
}

// GuardPairs returns every ACTIVE pointer (a CLOSED one cannot be moved;
// its pending incidents wait for it to reopen). Held pairs are returned
// with Held set, so their new incidents can be attached to the hold.
func (s *Store) GuardPairs(ctx context.Context) ([]GuardPair, error) {
	rows, err := s.pool.Query(ctx, `SELECT p.server_id, p.audience_class, p.generation,
  coalesce(m.move, ''), coalesce(m.previous_generation, 0), coalesce(m.accepted_at, p.moved_at),
  (SELECT max(a.resumed_at) FROM guard_actions a WHERE a.server_id = p.server_id AND a.audience_class = p.audience_class),
  EXISTS (SELECT 1 FROM guard_actions a WHERE a.server_id = p.server_id AND a.audience_class = p.audience_class AND a.resumed_at IS NULL),
  coalesce((SELECT array_agg(i.event_id ORDER BY i.reported_at, i.event_id) FROM guard_incidents i
    WHERE i.server_id = p.server_id AND i.audience_class = p.audience_class AND i.action_id IS NULL), '{}')
FROM pointers p
LEFT JOIN LATERAL (SELECT r.move, r.previous_generation, r.accepted_at FROM receipts r
  WHERE r.server_id = p.server_id AND r.audience_class = p.audience_class AND r.generation = p.generation
    AND r.move IN ('ACTIVATE', 'ROLLBACK') ORDER BY r.accepted_at DESC LIMIT 1) m ON true
WHERE p.state = 'ACTIVE'
ORDER BY p.server_id, p.audience_class`)
	if err != nil {
		return nil, fmt.Errorf("store: guard pairs: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (GuardPair, error) {
		var g GuardPair
		var move string
		var resumed *time.Time
		err := r.Scan(&g.ServerID, &g.AudienceClass, &g.Generation, &move, &g.Previous, &g.ActivatedAt, &resumed, &g.Held, &g.Incidents)
		if move != "ACTIVATE" {
			g.Previous = 0
		}
		if resumed != nil {
			g.ResumedAt = *resumed
		}
		return g, err
	})
}

// ToolIDs returns the tool ids of a retained generation; [ErrNotFound]
// when it is not retained.
func (s *Store) ToolIDs(ctx context.Context, serverID, audienceClass string, generation int64) (map[string]bool, error) {
	var ids []string
	err := s.pool.QueryRow(ctx, `SELECT coalesce((SELECT array_agg(t.tool_id) FROM snapshot_tools t
  WHERE t.server_id = $1 AND t.audience_class = $2 AND t.generation = $3), '{}')
FROM snapshots s WHERE s.server_id = $1 AND s.audience_class = $2 AND s.generation = $3`,
		serverID, audienceClass, generation).Scan(&ids)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, &NotFoundError{Kind: KindGeneration, ID: GenerationID(serverID, audienceClass, generation)}
	}
	if err != nil {
		return nil, fmt.Errorf("store: tool ids: %w", err)
	}
	out := make(map[string]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}

// GuardMove is one automatic move the guard decided, with its evidence.
type GuardMove struct {
	ServerID, AudienceClass string
	// Expected is the generation the guard saw active (CAS).
	Expected int64
	Rule     discoveryv1.GuardRule
	// Missing-tool rule evidence.
	Previous        int64
	Checks, Missing int64
	Threshold       float64
	WindowStart     time.Time
	MissingTools    []string
	// Incidents acted on (unauthorized-event rule).
	Incidents []string
	// Reason goes into the catalog receipt.
	Reason string
}

// Guard moves the pointer back like [Store.Rollback] (to the newest older
// fresh generation, else CLOSED) and records the guard action and consumes
// the incidents, all in one transaction. Errors as Rollback's, and
// [ErrHeld] when the pair is already held by an earlier action.
func (s *Store) Guard(ctx context.Context, m GuardMove) (*Committed, *discoveryv1.GuardAction, error) {
	var out *Committed
	var act *discoveryv1.GuardAction
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var held bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM guard_actions WHERE server_id = $1 AND audience_class = $2 AND resumed_at IS NULL)`,
			m.ServerID, m.AudienceClass).Scan(&held); err != nil {
			return err
		}
		if held {
			return ErrHeld
		}
		var err error
		if out, err = s.rollbackTx(ctx, tx, m.ServerID, m.AudienceClass, m.Expected, 0, m.Reason); err != nil {
			return err
		}
		var window *time.Time
		if !m.WindowStart.IsZero() {
			window = &m.WindowStart
		}
		tools := m.MissingTools
		if tools == nil {
			tools = []string{}
		}
		var id int64
		at := out.Receipt.GetAcceptedAt().AsTime()
		if err := tx.QueryRow(ctx, `INSERT INTO guard_actions (server_id, audience_class, rule, move, from_generation, to_generation,
  previous_generation, checks, missing, threshold, window_start, missing_tools, receipt_id, decided_at)
VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14) RETURNING action_id`,
			m.ServerID, m.AudienceClass, int16(m.Rule), int16(out.Receipt.GetMove()), m.Expected, out.Pointer.GetGeneration(),
			m.Previous, m.Checks, m.Missing, m.Threshold, window, tools, out.Receipt.GetReceiptId(), at).Scan(&id); err != nil {
			return err
		}
		if len(m.Incidents) > 0 {
			if _, err := tx.Exec(ctx, `UPDATE guard_incidents SET action_id = $1 WHERE event_id = ANY($2) AND action_id IS NULL`, id, m.Incidents); err != nil {
				return err
			}
		}
		act, err = guardAction(ctx, tx, id)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	s.moved(out)
	return out, act, nil
}

// ErrHeld: the pair is held by an earlier automatic move until an
// operator resumes it.
var ErrHeld = errors.New("store: the pair is held by the rollout guard")

// AttachIncidents gives the pair's pending incidents to the action that
// holds it (evidence that came while it was held is never acted on
// later) and returns how many it attached.
func (s *Store) AttachIncidents(ctx context.Context, serverID, audienceClass string) (int64, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE guard_incidents i SET action_id = a.action_id FROM guard_actions a
WHERE a.server_id = $1 AND a.audience_class = $2 AND a.resumed_at IS NULL
  AND i.server_id = $1 AND i.audience_class = $2 AND i.action_id IS NULL`, serverID, audienceClass)
	if err != nil {
		return 0, fmt.Errorf("store: attach incidents: %w", err)
	}
	return tag.RowsAffected(), nil
}

// ReportIncident stores an incident once per event id. For an id already
// stored it returns the stored incident and duplicate true.
func (s *Store) ReportIncident(ctx context.Context, in *discoveryv1.Incident) (*discoveryv1.Incident, bool, error) {
	tag, err := s.pool.Exec(ctx, `INSERT INTO guard_incidents (event_id, kind, server_id, audience_class, generation, tenant_id,
  observed_at, detail, reported_by) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9) ON CONFLICT (event_id) DO NOTHING`,
		in.GetEventId(), int16(in.GetKind()), in.GetServerId(), in.GetAudienceClass(), in.GetGeneration(), in.GetTenantId(),
		in.GetObservedAt().AsTime(), in.GetDetail(), in.GetReportedBy())
	if err != nil {
		return nil, false, fmt.Errorf("store: report incident: %w", err)
	}
	got, err := s.incident(ctx, in.GetEventId())
	return got, tag.RowsAffected() == 0, err
}

func (s *Store) incident(ctx context.Context, id string) (*discoveryv1.Incident, error) {
	var i discoveryv1.Incident
	var kind int16
	var observed, reported time.Time
	var action *int64
	err := s.pool.QueryRow(ctx, `SELECT event_id, kind, server_id, audience_class, generation, tenant_id, observed_at, detail,
  reported_by, reported_at, action_id FROM guard_incidents WHERE event_id = $1`, id).Scan(
		&i.EventId, &kind, &i.ServerId, &i.AudienceClass, &i.Generation, &i.TenantId, &observed, &i.Detail,
		&i.ReportedBy, &reported, &action)
	if err != nil {
		return nil, fmt.Errorf("store: read incident: %w", err)
	}
	i.Kind, i.ObservedAt, i.ReportedAt = discoveryv1.IncidentKind(kind), timestamppb.New(observed), timestamppb.New(reported)
	if action != nil {
		i.ActionId = *action
	}
	return &i, nil
}

// GuardFilter selects guard actions.
type GuardFilter struct {
	ServerID, AudienceClass string
	HeldOnly                bool
}

// ListGuardActions returns actions newest first with an id below before
// (0: from the newest), at most limit, and whether more follow.
func (s *Store) ListGuardActions(ctx context.Context, f GuardFilter, before int64, limit int) ([]*discoveryv1.GuardAction, bool, error) {
	rows, err := s.pool.Query(ctx, `SELECT action_id FROM guard_actions
WHERE ($1 = '' OR server_id = $1) AND ($2 = '' OR audience_class = $2) AND (NOT $3 OR resumed_at IS NULL)
  AND ($4 = 0 OR action_id < $4)
ORDER BY action_id DESC LIMIT $5`, f.ServerID, f.AudienceClass, f.HeldOnly, before, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("store: list guard actions: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, false, fmt.Errorf("store: list guard actions: %w", err)
	}
	more := len(ids) > limit
	if more {
		ids = ids[:limit]
	}
	out := make([]*discoveryv1.GuardAction, 0, len(ids))
	for _, id := range ids {
		a, err := guardAction(ctx, s.pool, id)
		if err != nil {
			return nil, false, err
		}
		out = append(out, a)
	}
	return out, more, nil
}

// ResumeGuard ends the pair's hold and returns the actions it resumed
// (none when the pair was not held).
func (s *Store) ResumeGuard(ctx context.Context, serverID, audienceClass, by, reason string) ([]*discoveryv1.GuardAction, error) {
	var out []*discoveryv1.GuardAction
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE guard_actions SET resumed_at = now(), resumed_by = $3, resume_reason = $4
WHERE server_id = $1 AND audience_class = $2 AND resumed_at IS NULL RETURNING action_id`, serverID, audienceClass, by, reason)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		// Incidents that came while the pair was held belong to the hold.
		if _, err := tx.Exec(ctx, `UPDATE guard_incidents SET action_id = $3
WHERE server_id = $1 AND audience_class = $2 AND action_id IS NULL AND $3 > 0`, serverID, audienceClass, maxID(ids)); err != nil {
			return err
		}
		for _, id := range ids {
			a, err := guardAction(ctx, tx, id)
			if err != nil {
				return err
			}
			out = append(out, a)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: resume guard: %w", err)
	}
	return out, nil
}

func maxID(ids []int64) int64 {
	var m int64
	for _, id := range ids {
		m = max(m, id)
	}
	return m
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func guardAction(ctx context.Context, q querier, id int64) (*discoveryv1.GuardAction, error) {
	var a discoveryv1.GuardAction
	var rule, move int16
	var window, resumed *time.Time
	var decided time.Time
	err := q.QueryRow(ctx, `SELECT a.action_id, a.server_id, a.audience_class, a.rule, a.move, a.from_generation, a.to_generation,
  a.previous_generation, a.checks, a.missing, a.threshold, a.window_start, a.missing_tools, a.receipt_id::text, a.decided_at,
  a.resumed_at, a.resumed_by, a.resume_reason,
  coalesce((SELECT array_agg(i.event_id ORDER BY i.reported_at, i.event_id) FROM guard_incidents i WHERE i.action_id = a.action_id), '{}')
FROM guard_actions a WHERE a.action_id = $1`, id).Scan(
		&a.ActionId, &a.ServerId, &a.AudienceClass, &rule, &move, &a.FromGeneration, &a.ToGeneration,
		&a.PreviousGeneration, &a.Checks, &a.Missing, &a.Threshold, &window, &a.MissingTools, &a.ReceiptId, &decided,
		&resumed, &a.ResumedBy, &a.ResumeReason, &a.IncidentIds)
	if err != nil {
		return nil, fmt.Errorf("store: read guard action %d: %w", id, err)
	}
	a.Rule, a.Move, a.DecidedAt = discoveryv1.GuardRule(rule), catalogv1.PointerMove(move), timestamppb.New(decided)
	if window != nil {
		a.WindowStart = timestamppb.New(*window)
	}
	if resumed != nil {
		a.ResumedAt = timestamppb.New(*resumed)
	}
	return &a, nil
}

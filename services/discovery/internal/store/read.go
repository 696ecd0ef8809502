package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
)

const runColumns = `run_id::text, scan_id, attempt, server_id, audience_class, tenant_id, state, reason, detail, trigger, worker,
started_at, finished_at, protocol_version, source_revision, closing_revision, page_root, page_count, tool_count, bytes,
policy_epoch, generation, confirmed_generation, identity_digest, trust_config_digest, cache_scope, flags,
suppressed_notifications, notification_delay_ms`

func scanRun(row pgx.Row) (*discoveryv1.Run, error) {
	var r discoveryv1.Run
	var state, reason, trigger string
	var started time.Time
	var finished *time.Time
	var flags []byte
	if err := row.Scan(&r.RunId, &r.ScanId, &r.Attempt, &r.ServerId, &r.AudienceClass, &r.TenantId, &state, &reason, &r.Detail,
		&trigger, &r.Worker, &started, &finished, &r.ProtocolVersion, &r.SourceRevision, &r.ClosingRevision, &r.PageRoot,
		&r.PageCount, &r.ToolCount, &r.Bytes, &r.PolicyEpoch, &r.Generation, &r.ConfirmedGeneration, &r.IdentityDigest,
		&r.TrustConfigDigest, &r.CacheScope, &flags, &r.SuppressedNotifications, &r.NotificationDelayMs); err != nil {
		return nil, err
	}
	r.State, r.Reason, r.Trigger = stateValue(state), reasonValue(reason), triggerValue(trigger)
	r.StartedAt = timestamppb.New(started)
	if finished != nil {
		r.FinishedAt = timestamppb.New(*finished)
	}
	var fs []storedFlag
	if err := json.Unmarshal(flags, &fs); err != nil {
		return nil, err
	}
	for _, f := range fs {
		r.Flags = append(r.Flags, &discoveryv1.RunFlag{ToolName: f.Tool, Flag: f.Flag, Detail: f.Detail})
	}
	return &r, nil
}

// GetRun returns one run, with its pages when asked. [ErrNotFound] when
// unknown (or runID is not a UUID).
func (s *Store) GetRun(ctx context.Context, runID string, pages bool) (*discoveryv1.Run, error) {
	r, err := scanRun(s.pool.QueryRow(ctx, `SELECT `+runColumns+` FROM runs WHERE run_id::text = $1`, strings.ToLower(runID)))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, &NotFoundError{Kind: KindRun, ID: runID}
	}
	if err != nil {
		return nil, fmt.Errorf("store: get run: %w", err)
	}
	if !pages {
		return r, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT idx, cursor_in, cursor_out, has_next, revision, tool_count, page_digest, bytes, received_at
FROM run_pages WHERE run_id::text = $1 ORDER BY idx`, r.RunId)
	if err != nil {
		return nil, err
	}
	r.Pages, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*discoveryv1.Page, error) {
		var p discoveryv1.Page
		var at time.Time
		err := row.Scan(&p.Index, &p.CursorIn, &p.CursorOut, &p.HasNext, &p.Revision, &p.ToolCount, &p.PageDigest, &p.Bytes, &at)
		p.ReceivedAt = timestamppb.New(at)
		return &p, err
	})
	return r, err
}

// RunFilter selects runs.
type RunFilter struct {
	ServerID, AudienceClass, ScanID string
	States                          []catalogv1.DiscoveryState
	// TenantID, when set, restricts to runs of that tenant's classes.
	TenantID string
}

// RunCursor is the position after the last run of a page.
type RunCursor struct {
	StartedAt time.Time
	RunID     string
}

// ListRuns returns up to limit runs newest first, after cursor (nil for the
// first page), and whether more follow.
func (s *Store) ListRuns(ctx context.Context, f RunFilter, after *RunCursor, limit int) ([]*discoveryv1.Run, bool, error) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if f.ServerID != "" {
		add("server_id = $%d", f.ServerID)
	}
	if f.AudienceClass != "" {
		add("audience_class = $%d", f.AudienceClass)
	}
	if f.ScanID != "" {
		add("scan_id = $%d", f.ScanID)
	}
	if f.TenantID != "" {
		add("tenant_id = $%d", f.TenantID)
	}
	if len(f.States) > 0 {
		names := make([]string, len(f.States))
		for i, st := range f.States {
			names[i] = stateName(st)
		}
		add("state = ANY($%d)", names)
	}
	if after != nil {
		args = append(args, after.StartedAt, after.RunID)
		where = append(where, fmt.Sprintf("(started_at, run_id::text) < ($%d, $%d)", len(args)-1, len(args)))
	}
	q := `SELECT ` + runColumns + ` FROM runs`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	args = append(args, limit+1)
	q += fmt.Sprintf(" ORDER BY started_at DESC, run_id::text DESC LIMIT $%d", len(args))
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, false, fmt.Errorf("store: list runs: %w", err)
	}
	runs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*discoveryv1.Run, error) { return scanRun(r) })
	if err != nil {
		return nil, false, fmt.Errorf("store: list runs: %w", err)
	}
	more := len(runs) > limit
	if more {
		runs = runs[:limit]
	}
	return runs, more, nil
}

// ActivePointer returns a pointer. [ErrNotFound] when no generation was ever
// committed for the pair.
func (s *Store) ActivePointer(ctx context.Context, serverID, audienceClass string) (*discoveryv1.ActivePointer, error) {
	var p discoveryv1.ActivePointer
	var state, snapState string
	var moved, fresh time.Time
	err := s.pool.QueryRow(ctx, `SELECT p.server_id, p.audience_class, p.tenant_id, p.generation, p.state, s.state, p.moved_at,
p.fresh_until, p.revision, s.source_revision, s.page_root
FROM pointers p JOIN snapshots s USING (server_id, audience_class, generation)
WHERE p.server_id = $1 AND p.audience_class = $2`, serverID, audienceClass).
		Scan(&p.ServerId, &p.AudienceClass, &p.TenantId, &p.Generation, &state, &snapState, &moved, &fresh, &p.Revision,
			&p.SourceRevision, &p.PageRoot)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, &NotFoundError{Kind: KindActivePointer, ID: PointerID(serverID, audienceClass)}
	}
	if err != nil {
		return nil, fmt.Errorf("store: pointer: %w", err)
	}
	p.State = discoveryv1.PointerState(discoveryv1.PointerState_value["POINTER_STATE_"+state])
	p.SnapshotState = stateValue(snapState)
	p.MovedAt, p.FreshUntil = timestamppb.New(moved), timestamppb.New(fresh)
	return &p, nil
}

// Snapshot returns a generation's snapshot with tools [offset, offset+limit)
// (limit 0: all) and the total number of tools. The state is RETIRED for a
// retired generation, its committed state otherwise. [ErrNotFound] when the
// generation is unknown or no longer retained.
func (s *Store) Snapshot(ctx context.Context, serverID, audienceClass string, generation int64, offset, limit int) (*catalogv1.Snapshot, int, error) {
	var snap catalogv1.Snapshot
	var state string
	var started, expires time.Time
	var retired *time.Time
	var total int
	err := s.pool.QueryRow(ctx, `SELECT s.server_id, s.audience_class, s.generation, s.tenant_id, s.run_id::text, s.state,
s.identity_digest, s.endpoint_digest, s.protocol_version, s.discovery_started_at, s.expires_at, s.policy_epoch,
s.source_revision, s.page_root, s.page_digests, s.cache_scope, s.trust_config_digest, s.snapshot_digest, s.tool_count, g.retired_at
FROM snapshots s JOIN generations g USING (server_id, audience_class, generation)
WHERE s.server_id = $1 AND s.audience_class = $2 AND s.generation = $3`, serverID, audienceClass, generation).
		Scan(&snap.ServerId, &snap.AudienceClass, &snap.Generation, &snap.Tenant, &snap.RunId, &state, &snap.IdentityDigest,
			&snap.EndpointDigest, &snap.ProtocolVersion, &started, &expires, &snap.PolicyEpoch, &snap.SourceRevision,
			&snap.PageRoot, &snap.PageDigests, &snap.CacheScope, &snap.TrustConfigDigest, &snap.SnapshotDigest, &total, &retired)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, &NotFoundError{Kind: KindGeneration, ID: GenerationID(serverID, audienceClass, generation)}
	}
	if err != nil {
		return nil, 0, fmt.Errorf("store: snapshot: %w", err)
	}
	snap.Schema = "toolCatalogSnapshot.v1"
	snap.State = stateValue(state)
	if retired != nil {
		snap.State = catalogv1.DiscoveryState_DISCOVERY_STATE_RETIRED
	}
	snap.DiscoveryStartedAt, snap.ExpiresAt = timestamppb.New(started), timestamppb.New(expires)
	if limit <= 0 {
		limit = total
	}
	rows, err := s.pool.Query(ctx, `SELECT tool_id, name, descriptor_digest, input_schema_digest, output_schema_digest,
schema_dialect, flags, raw FROM snapshot_tools
WHERE server_id = $1 AND audience_class = $2 AND generation = $3 AND ordinal >= $4 ORDER BY ordinal LIMIT $5`,
		serverID, audienceClass, generation, offset, limit)
	if err != nil {
		return nil, 0, err
	}
	snap.Tools, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (*catalogv1.ToolDescriptor, error) {
		var t catalogv1.ToolDescriptor
		err := r.Scan(&t.ToolId, &t.Name, &t.DescriptorDigest, &t.InputSchemaDigest, &t.OutputSchemaDigest, &t.SchemaDialect, &t.Flags, &t.Raw)
		return &t, err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("store: snapshot tools: %w", err)
	}
	return &snap, total, nil
}

// ListGenerations returns up to limit generations below `before` (0: from
// the newest), newest first, and whether more follow.
func (s *Store) ListGenerations(ctx context.Context, serverID, audienceClass string, before int64, limit int) ([]*discoveryv1.Generation, bool, error) {
	if before <= 0 {
		before = 1 << 62
	}
	rows, err := s.pool.Query(ctx, `SELECT s.generation, s.state, g.retired_at IS NOT NULL, s.source_revision, s.page_root,
s.tool_count, s.committed_at, g.fresh_until, s.run_id::text, p.generation IS NOT NULL AND p.state = 'ACTIVE',
(SELECT max(b.bound_until) FROM bindings b WHERE b.server_id = s.server_id AND b.audience_class = s.audience_class
   AND b.generation = s.generation AND b.bound_until > now())
FROM snapshots s JOIN generations g USING (server_id, audience_class, generation)
LEFT JOIN pointers p ON p.server_id = s.server_id AND p.audience_class = s.audience_class AND p.generation = s.generation
WHERE s.server_id = $1 AND s.audience_class = $2 AND s.generation < $3
ORDER BY s.generation DESC LIMIT $4`, serverID, audienceClass, before, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("store: generations: %w", err)
	}
	gens, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*discoveryv1.Generation, error) {
		var g discoveryv1.Generation
		var state string
		var retired, active bool
		var committed, fresh time.Time
		var bound *time.Time
		if err := r.Scan(&g.Generation, &state, &retired, &g.SourceRevision, &g.PageRoot, &g.ToolCount, &committed, &fresh,
			&g.RunId, &active, &bound); err != nil {
			return nil, err
		}
		g.State = stateValue(state)
		if retired {
			g.State = catalogv1.DiscoveryState_DISCOVERY_STATE_RETIRED
		}
		g.CommittedAt, g.ExpiresAt, g.Active = timestamppb.New(committed), timestamppb.New(fresh), active
		if bound != nil {
			g.BoundUntil = timestamppb.New(*bound)
		}
		return &g, nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("store: generations: %w", err)
	}
	more := len(gens) > limit
	if more {
		gens = gens[:limit]
	}
	return gens, more, nil
}

// Tenant returns the tenant owning a pointer's audience class, from the
// pointer or its runs; [ErrNotFound] when discovery knows nothing of it.
func (s *Store) Tenant(ctx context.Context, serverID, audienceClass string) (string, error) {
	var t string
	err := s.pool.QueryRow(ctx, `SELECT tenant_id FROM pointers WHERE server_id = $1 AND audience_class = $2
UNION ALL SELECT tenant_id FROM runs WHERE server_id = $1 AND audience_class = $2 AND tenant_id <> '' LIMIT 1`,
		serverID, audienceClass).Scan(&t)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrNotFound
	}
	return t, err
}

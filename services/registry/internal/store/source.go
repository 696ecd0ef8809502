package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/toolcrib/toolcrib/services/registry/internal/contract"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// PointerUpdate is one move of discovery's active pointer of a (server,
// audience class), with the tools of the snapshot it names.
type PointerUpdate struct {
	ServerID      string
	AudienceClass string
	// Revision is the discovery revision of the move (the pointer's
	// revision). A move is applied only if it is newer than the last one
	// applied for the pair, so replays and out-of-date reads are harmless.
	Revision   int64
	Generation int64
	// Closed is true for a CLOSED pointer: recorded, tools left as they are
	// (admission answers SERVER_CLOSED from discovery's own pointer).
	Closed         bool
	SnapshotDigest string
	// Tools are the snapshot's tools; ignored when Closed.
	Tools []SourceTool
	// Cursor, when positive, is stored as the discovery Watch cursor in the
	// same transaction (never moved backwards).
	Cursor int64
}

// SourceTool is one tool of a snapshot.
type SourceTool struct {
	Name             string
	DescriptorDigest string
	Raw              []byte
}

// ApplyResult says what applying a pointer move did.
type ApplyResult struct {
	// Skipped is why nothing was applied: `unknown server` or `not newer`;
	// empty when applied.
	Skipped string
	// Changed are the ids of the tools whose record changed.
	Changed []string
}

// ApplyPointer records a pointer move and brings the tools of its server
// in line, in one transaction:
//   - a tool no record has → created PENDING_CONTRACT, disabled (DISCOVERED);
//   - a new descriptor digest → recorded, review re-evaluated, so a tool
//     with a contract becomes UNREVIEWED unless that exact digest is
//     approved (DESCRIPTOR_CHANGED);
//   - a tool no pointer of the server lists any more → present_at_source
//     false (REMOVED_AT_SOURCE); listed again → RESTORED_AT_SOURCE.
//
// A tool's descriptor is the one listed by the most recently moved pointer
// that lists it. Source changes do not bump policy epochs: they come with a
// new generation, which admission's cache key already carries, and approvals
// are bound to descriptor digests (see the registry.proto package comment).
// A move for a server the registry does not know is skipped; the cursor
// still advances.
func (s *Store) ApplyPointer(ctx context.Context, up PointerUpdate) (ApplyResult, error) {
	var res ApplyResult
	err := s.write(ctx, func(u *unit) error {
		res = ApplyResult{}
		if up.Cursor > 0 {
			if err := advanceCursor(ctx, u.tx, up.Cursor); err != nil {
				return err
			}
		}
		var owner string
		err := u.tx.QueryRow(ctx, "SELECT owner FROM servers WHERE server_id = $1", up.ServerID).Scan(&owner)
		if errors.Is(err, pgx.ErrNoRows) {
			res.Skipped = "unknown server"
			return nil
		}
		if err != nil {
			return err
		}
		state := int16(1)
		if up.Closed {
			state = 2
		}
		// The guard: only a move newer than the pair's last applied move.
		tag, err := u.tx.Exec(ctx, `INSERT INTO source_pointers (server_id, audience_class, generation, state,
	discovery_revision, snapshot_digest) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (server_id, audience_class) DO UPDATE SET generation = EXCLUDED.generation, state = EXCLUDED.state,
	discovery_revision = EXCLUDED.discovery_revision, snapshot_digest = EXCLUDED.snapshot_digest, applied_at = now()
WHERE source_pointers.discovery_revision < EXCLUDED.discovery_revision`,
			up.ServerID, up.AudienceClass, up.Generation, state, up.Revision, up.SnapshotDigest)
		if err != nil {
			return fmt.Errorf("record pointer: %w", err)
		}
		if tag.RowsAffected() == 0 {
			res.Skipped = "not newer"
			return nil
		}
		if up.Closed {
			return nil
		}
		names, err := replaceSourceTools(ctx, u.tx, up)
		if err != nil {
			return err
		}
		res.Changed, err = reconcileTools(ctx, u, up.ServerID, owner, names)
		return err
	})
	return res, err
}

// replaceSourceTools replaces the pair's listed tools and returns the names
// listed before or now, sorted.
func replaceSourceTools(ctx context.Context, tx pgx.Tx, up PointerUpdate) ([]string, error) {
	rows, err := tx.Query(ctx, "DELETE FROM source_tools WHERE server_id = $1 AND audience_class = $2 RETURNING name",
		up.ServerID, up.AudienceClass)
	if err != nil {
		return nil, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	for _, t := range up.Tools {
		if _, err := tx.Exec(ctx, `INSERT INTO source_tools (server_id, audience_class, name, descriptor_digest,
	descriptor_raw, discovery_revision) VALUES ($1, $2, $3, $4, $5, $6)`,
			up.ServerID, up.AudienceClass, t.Name, t.DescriptorDigest, t.Raw, up.Revision); err != nil {
			return nil, fmt.Errorf("record source tool %s: %w", t.Name, err)
		}
		names = append(names, t.Name)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// reconcileTools brings the named tools of a server in line with what its
// pointers list, and returns the ids of those that changed.
func reconcileTools(ctx context.Context, u *unit, serverID, owner string, names []string) ([]string, error) {
	ids := make([]string, len(names))
	for i, n := range names {
		ids[i] = contract.ToolID(serverID, n)
	}
	tools, err := loadTools(ctx, u.tx, ids, true)
	if err != nil {
		return nil, err
	}
	rows, err := u.tx.Query(ctx, `SELECT DISTINCT ON (name) name, descriptor_digest, descriptor_raw FROM source_tools
WHERE server_id = $1 AND name = ANY($2) ORDER BY name, discovery_revision DESC, audience_class`, serverID, names)
	if err != nil {
		return nil, err
	}
	listed := map[string]SourceTool{}
	_, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct{}, error) {
		var t SourceTool
		err := r.Scan(&t.Name, &t.DescriptorDigest, &t.Raw)
		listed[t.Name] = t
		return struct{}{}, err
	})
	if err != nil {
		return nil, err
	}
	var changed []string
	for i, name := range names {
		id := ids[i]
		src, isListed := listed[name]
		t, known := tools[id]
		var (
			events []toolEvent
			kind   = registryv1.ChangeKind_CHANGE_KIND_UPDATED
		)
		switch {
		case !known && !isListed:
			continue
		case !known:
			t = &toolRow{ID: id, ServerID: serverID, Name: name, Owner: owner, Present: true,
				DescriptorDigest: src.DescriptorDigest, DescriptorRaw: src.Raw}
			if err := t.evaluate(); err != nil {
				return nil, err
			}
			if err := u.tx.QueryRow(ctx, `INSERT INTO tools (tool_id, server_id, name, review_state, descriptor_digest,
	descriptor_raw) VALUES ($1, $2, $3, $4, $5, $6) RETURNING version, updated_at`,
				id, serverID, name, int16(t.State), t.DescriptorDigest, t.DescriptorRaw).Scan(&t.Version, &t.UpdatedAt); err != nil {
				return nil, fmt.Errorf("create tool %s: %w", id, err)
			}
			kind = registryv1.ChangeKind_CHANGE_KIND_CREATED
			events = append(events, t.event(EventDiscovered, DiscoveryActor, ""))
		default:
			type happened struct{ kind, detail string }
			var seen []happened
			if isListed && !t.Present {
				t.Present = true
				seen = append(seen, happened{kind: EventRestoredAtSource})
			}
			if isListed && src.DescriptorDigest != t.DescriptorDigest {
				seen = append(seen, happened{kind: EventDescriptorChanged, detail: "previous descriptor " + t.DescriptorDigest})
				t.DescriptorDigest, t.DescriptorRaw = src.DescriptorDigest, src.Raw
			}
			if !isListed && t.Present {
				t.Present = false
				seen = append(seen, happened{kind: EventRemovedAtSource})
			}
			if len(seen) == 0 {
				continue
			}
			if err := t.evaluate(); err != nil {
				return nil, err
			}
			if err := t.save(ctx, u.tx); err != nil {
				return nil, err
			}
			for _, h := range seen {
				events = append(events, t.event(h.kind, DiscoveryActor, h.detail))
			}
		}
		u.emitTool(kind, t.proto(), events)
		changed = append(changed, id)
	}
	return changed, nil
}

// DiscoveryCursor returns the discovery Watch revision the registry has
// applied every move up to.
func (s *Store) DiscoveryCursor(ctx context.Context) (int64, error) {
	var rev int64
	err := s.pool.QueryRow(ctx, "SELECT revision FROM discovery_cursor").Scan(&rev)
	return rev, err
}

// AdvanceDiscoveryCursor stores rev as the cursor if it is ahead.
func (s *Store) AdvanceDiscoveryCursor(ctx context.Context, rev int64) error {
	return advanceCursor(ctx, s.pool, rev)
}

// ResetDiscoveryCursor stores rev as the cursor even if it is behind: after
// a re-read of every pointer, the cursor is wherever that re-read ended.
func (s *Store) ResetDiscoveryCursor(ctx context.Context, rev int64) error {
	_, err := s.pool.Exec(ctx, "UPDATE discovery_cursor SET revision = $1, updated_at = now()", rev)
	return err
}

func advanceCursor(ctx context.Context, q interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, rev int64) error {
	_, err := q.Exec(ctx, "UPDATE discovery_cursor SET revision = $1, updated_at = now() WHERE revision < $1", rev)
	return err
}

// Pair is one (server, audience class).
type Pair struct {
	ServerID      string
	AudienceClass string
}

// PairRevision returns the discovery revision of the last move applied to
// the pair; 0 when none was.
func (s *Store) PairRevision(ctx context.Context, p Pair) (int64, error) {
	var rev int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(max(discovery_revision), 0) FROM source_pointers
WHERE server_id = $1 AND audience_class = $2`, p.ServerID, p.AudienceClass).Scan(&rev)
	return rev, err
}

// SourcePairs returns every (server, audience class) that discovery scans
// (an audience class covers the server) or whose pointer was applied.
func (s *Store) SourcePairs(ctx context.Context) ([]Pair, error) {
	rows, err := s.pool.Query(ctx, `SELECT server_id, class_name FROM audience_servers
UNION SELECT server_id, audience_class FROM source_pointers ORDER BY 1, 2`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Pair, error) {
		var p Pair
		err := r.Scan(&p.ServerID, &p.AudienceClass)
		return p, err
	})
}

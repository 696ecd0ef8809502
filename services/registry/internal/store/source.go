package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/toolcrib/toolcrib/platform/ids"

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
//   - a tool no record has → created PENDING_CONTRACT, disabled;
//   - a tool the pair's audience class lists for the first time → a new
//     variant of the class (DISCOVERED);
//   - a new descriptor digest → recorded in the class's variant, whose
//     review is re-evaluated, so with a contract it becomes UNREVIEWED
//     unless that exact digest is approved (DESCRIPTOR_CHANGED);
//   - a tool the class no longer lists → the class's variant is not
//     present at the source (REMOVED_AT_SOURCE); listed again →
//     RESTORED_AT_SOURCE.
//
// Only the class's own variant changes: what another class sees, and its
// review state, stays as it was. The deprecated tool-level descriptor is
// that of the variant most recently changed at the source. Source changes do not bump policy epochs: they come with a
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
		res.Changed, err = reconcileTools(ctx, u, up, owner, names)
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

// reconcileTools brings the named tools of the pair's server in line with
// what the pair's pointer now lists, changing only the pair's class's
// variant of each (review is per descriptor: another class's variant, and
// so its review state, is never touched), and returns the ids of those
// that changed.
func reconcileTools(ctx context.Context, u *unit, up PointerUpdate, owner string, names []string) ([]string, error) {
	toolIDs := make([]string, len(names))
	for i, n := range names {
		toolIDs[i] = ids.ToolID(up.ServerID, n)
	}
	tools, err := loadTools(ctx, u.tx, toolIDs, true)
	if err != nil {
		return nil, err
	}
	listed := make(map[string]SourceTool, len(up.Tools))
	for _, t := range up.Tools {
		listed[t.Name] = t
	}
	var changed []string
	for i, name := range names {
		id := toolIDs[i]
		src, isListed := listed[name]
		t, known := tools[id]
		kind := registryv1.ChangeKind_CHANGE_KIND_UPDATED
		switch {
		case !known && !isListed:
			continue
		case !known:
			t = &toolRow{ID: id, ServerID: up.ServerID, Name: name, Owner: owner, Present: true,
				DescriptorDigest: src.DescriptorDigest, DescriptorRaw: src.Raw}
			if err := t.evaluate(); err != nil {
				return nil, err
			}
			if err := u.tx.QueryRow(ctx, `INSERT INTO tools (tool_id, server_id, name, review_state, descriptor_digest,
	descriptor_raw) VALUES ($1, $2, $3, $4, $5, $6) RETURNING version, updated_at`,
				id, up.ServerID, name, int16(t.State), t.DescriptorDigest, t.DescriptorRaw).Scan(&t.Version, &t.UpdatedAt); err != nil {
				return nil, fmt.Errorf("create tool %s: %w", id, err)
			}
			kind = registryv1.ChangeKind_CHANGE_KIND_CREATED
		}
		type happened struct{ kind, detail string }
		var seen []happened
		v := t.variant(up.AudienceClass)
		switch {
		case v == nil && !isListed:
			continue
		case v == nil:
			v = &variantRow{Class: up.AudienceClass}
			t.Variants = append(t.Variants, v)
			slices.SortFunc(t.Variants, func(a, b *variantRow) int { return strings.Compare(a.Class, b.Class) })
			v.DescriptorDigest, v.DescriptorRaw, v.Present = src.DescriptorDigest, src.Raw, true
			seen = append(seen, happened{kind: EventDiscovered})
		case isListed:
			if !v.Present {
				v.Present = true
				seen = append(seen, happened{kind: EventRestoredAtSource})
			}
			if src.DescriptorDigest != v.DescriptorDigest {
				seen = append(seen, happened{kind: EventDescriptorChanged, detail: "previous descriptor " + v.DescriptorDigest})
				v.DescriptorDigest, v.DescriptorRaw = src.DescriptorDigest, src.Raw
			}
		case v.Present:
			v.Present = false
			seen = append(seen, happened{kind: EventRemovedAtSource})
		}
		if len(seen) == 0 {
			continue
		}
		v.Generation, v.DiscoveryRevision = up.Generation, up.Revision
		if err := t.evaluate(); err != nil {
			return nil, err
		}
		if err := t.save(ctx, u.tx); err != nil {
			return nil, err
		}
		events := make([]toolEvent, len(seen))
		for i, h := range seen {
			events[i] = t.variantEvent(v, h.kind, h.detail)
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

package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/services/discovery/internal/comparison"
)

// ErrStaticListMoved says a static tool list is not at the version the
// caller expected.
var ErrStaticListMoved = errors.New("store: the static tool list is not at the expected version")

// Kinds of [NotFoundError] for the shadow comparison.
const (
	KindStaticList = "static tool list"
	KindComparison = "run comparison"
)

// StaticList is a static tool list to store: its entries (checked by the
// caller: valid, unique names) and the canonical input schemas by name.
type StaticList struct {
	ServerID, AudienceClass, TenantID string
	Entries                           []comparison.Entry
	Schemas                           map[string]string
	SetBy, Reason                     string
}

// SetStaticList replaces the pair's static tool list and returns it as
// stored. expected > 0 replaces only that version ([ErrStaticListMoved]
// otherwise, also when none is stored); 0 replaces any or sets the first.
func (s *Store) SetStaticList(ctx context.Context, l StaticList, expected int64) (*discoveryv1.StaticToolList, error) {
	entries := l.Entries
	if entries == nil {
		entries = []comparison.Entry{}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	ej, err := json.Marshal(entries)
	if err != nil {
		return nil, err
	}
	schemas := l.Schemas
	if schemas == nil {
		schemas = map[string]string{}
	}
	sj, err := json.Marshal(schemas)
	if err != nil {
		return nil, err
	}
	var version int64
	var at time.Time
	if expected > 0 {
		err = s.pool.QueryRow(ctx, `UPDATE static_tool_lists SET version = version + 1, tenant_id = $3, entries = $4, schemas = $5,
set_by = $6, set_at = now(), reason = $7
WHERE server_id = $1 AND audience_class = $2 AND version = $8 RETURNING version, set_at`,
			l.ServerID, l.AudienceClass, l.TenantID, ej, sj, l.SetBy, l.Reason, expected).Scan(&version, &at)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, ErrStaticListMoved
		}
	} else {
		err = s.pool.QueryRow(ctx, `INSERT INTO static_tool_lists AS l (server_id, audience_class, tenant_id, version, entries, schemas, set_by, set_at, reason)
VALUES ($1, $2, $3, 1, $4, $5, $6, now(), $7)
ON CONFLICT (server_id, audience_class) DO UPDATE SET version = l.version + 1, tenant_id = EXCLUDED.tenant_id,
entries = EXCLUDED.entries, schemas = EXCLUDED.schemas, set_by = EXCLUDED.set_by, set_at = EXCLUDED.set_at, reason = EXCLUDED.reason
RETURNING version, set_at`, l.ServerID, l.AudienceClass, l.TenantID, ej, sj, l.SetBy, l.Reason).Scan(&version, &at)
	}
	if err != nil {
		return nil, fmt.Errorf("store: set static tool list: %w", err)
	}
	return staticProto(l.ServerID, l.AudienceClass, l.TenantID, version, entries, schemas, l.SetBy, at, l.Reason), nil
}

// GetStaticList returns the pair's static tool list; [ErrNotFound] when none
// was set.
func (s *Store) GetStaticList(ctx context.Context, serverID, audienceClass string) (*discoveryv1.StaticToolList, error) {
	var (
		tenant, by, reason string
		version            int64
		at                 time.Time
		ej, sj             []byte
	)
	err := s.pool.QueryRow(ctx, `SELECT tenant_id, version, entries, schemas, set_by, set_at, reason FROM static_tool_lists
WHERE server_id = $1 AND audience_class = $2`, serverID, audienceClass).Scan(&tenant, &version, &ej, &sj, &by, &at, &reason)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, &NotFoundError{Kind: KindStaticList, ID: PointerID(serverID, audienceClass)}
	}
	if err != nil {
		return nil, fmt.Errorf("store: static tool list: %w", err)
	}
	var entries []comparison.Entry
	schemas := map[string]string{}
	if err := json.Unmarshal(ej, &entries); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(sj, &schemas); err != nil {
		return nil, err
	}
	return staticProto(serverID, audienceClass, tenant, version, entries, schemas, by, at, reason), nil
}

func staticProto(server, aud, tenant string, version int64, entries []comparison.Entry, schemas map[string]string,
	by string, at time.Time, reason string) *discoveryv1.StaticToolList {
	out := &discoveryv1.StaticToolList{ServerId: server, AudienceClass: aud, TenantId: tenant, Version: version,
		SetBy: by, SetAt: timestamppb.New(at), Reason: reason, Tools: make([]*discoveryv1.StaticTool, len(entries))}
	for i, e := range entries {
		t := &discoveryv1.StaticTool{Name: e.Name, DescriptorDigest: e.DescriptorDigest, InputSchemaDigest: e.InputSchemaDigest}
		if sc, ok := schemas[e.Name]; ok {
			t.InputSchema = []byte(sc)
		}
		out.Tools[i] = t
	}
	return out
}

// StaticListVersion returns the version of the pair's static tool list, 0
// when none is attached.
func (s *Store) StaticListVersion(ctx context.Context, serverID, audienceClass string) (int64, error) {
	var v int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce((SELECT version FROM static_tool_lists WHERE server_id = $1 AND audience_class = $2), 0)`,
		serverID, audienceClass).Scan(&v)
	return v, err
}

// reference is what a commit compares its generation with, read by the
// commit's statement ([writeCommit]): the pair's static list and the
// previous generation's tools.
type reference struct {
	staticVersion int64
	static        []comparison.Entry
	previous      []comparison.Tool
}

// comparisonRow is one run_comparisons row to write.
type comparisonRow struct {
	runID, server, aud, tenant string
	generation, staticVersion  int64
	againstStatic              *discoveryv1.ToolDiff
	previousGeneration         int64
	againstPrevious            *discoveryv1.ToolDiff
	at                         time.Time
}

func diffJSON(d *discoveryv1.ToolDiff) ([]byte, error) {
	if d == nil {
		return nil, nil
	}
	return protojson.Marshal(d)
}

// writeComparison stores a commit's comparison in tx; nothing when there
// is neither a static list nor a previous generation.
func writeComparison(ctx context.Context, tx pgx.Tx, c comparisonRow) error {
	if c.againstStatic == nil && c.againstPrevious == nil {
		return nil
	}
	sj, err := diffJSON(c.againstStatic)
	if err != nil {
		return err
	}
	pj, err := diffJSON(c.againstPrevious)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO run_comparisons (run_id, server_id, audience_class, tenant_id, generation,
static_version, against_static, previous_generation, against_previous, compared_at)
VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)`, c.runID, c.server, c.aud, c.tenant, c.generation, c.staticVersion, sj,
		c.previousGeneration, pj, c.at); err != nil {
		return fmt.Errorf("store: run comparison: %w", err)
	}
	return nil
}

// compareCommit is the comparison of a commit's generation gen with ref.
func compareCommit(c Commit, gen int64, ref *reference, now time.Time) comparisonRow {
	snap := c.Snapshot
	row := comparisonRow{runID: c.RunID, server: snap.GetServerId(), aud: snap.GetAudienceClass(), tenant: snap.GetTenant(),
		generation: gen, at: now}
	if ref.staticVersion == 0 && c.Expected.Generation == 0 {
		return row
	}
	tools := make([]comparison.Tool, len(snap.GetTools()))
	for i, t := range snap.GetTools() {
		tools[i] = comparison.Tool{Name: t.GetName(), DescriptorDigest: t.GetDescriptorDigest(), InputSchemaDigest: t.GetInputSchemaDigest()}
	}
	if ref.staticVersion > 0 {
		row.staticVersion, row.againstStatic = ref.staticVersion, comparison.AgainstStatic(ref.static, tools)
	}
	if prev := c.Expected.Generation; prev > 0 {
		row.previousGeneration, row.againstPrevious = prev, comparison.AgainstPrevious(ref.previous, tools)
	}
	return row
}

// refreshComparison stores, in a refresh's tx, the comparison of the
// generation it proved again with the static list at version version,
// taking the comparison with the previous generation from the newest
// stored comparison of that generation.
func refreshComparison(ctx context.Context, tx pgx.Tx, runID, server, aud, tenant string, gen, version int64, against *discoveryv1.ToolDiff, now time.Time) error {
	sj, err := diffJSON(against)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO run_comparisons (run_id, server_id, audience_class, tenant_id, generation,
static_version, against_static, previous_generation, against_previous, compared_at)
SELECT $1, $2, $3, $4, $5, $6, $7, coalesce(c.previous_generation, 0), c.against_previous, $8
FROM (SELECT 1) one LEFT JOIN LATERAL (SELECT previous_generation, against_previous FROM run_comparisons
  WHERE server_id = $2 AND audience_class = $3 AND generation = $5 ORDER BY compared_at DESC LIMIT 1) c ON true`,
		runID, server, aud, tenant, gen, version, sj, now); err != nil {
		return fmt.Errorf("store: run comparison: %w", err)
	}
	return nil
}

const comparisonColumns = `run_id::text, server_id, audience_class, tenant_id, generation, static_version, against_static,
previous_generation, against_previous, compared_at`

func scanComparison(row pgx.Row) (*discoveryv1.RunComparison, error) {
	var c discoveryv1.RunComparison
	var sj, pj []byte
	var at time.Time
	if err := row.Scan(&c.RunId, &c.ServerId, &c.AudienceClass, &c.TenantId, &c.Generation, &c.StaticListVersion, &sj,
		&c.PreviousGeneration, &pj, &at); err != nil {
		return nil, err
	}
	c.ComparedAt = timestamppb.New(at)
	if sj != nil {
		c.AgainstStatic = &discoveryv1.ToolDiff{}
		if err := protojson.Unmarshal(sj, c.AgainstStatic); err != nil {
			return nil, err
		}
	}
	if pj != nil {
		c.AgainstPrevious = &discoveryv1.ToolDiff{}
		if err := protojson.Unmarshal(pj, c.AgainstPrevious); err != nil {
			return nil, err
		}
	}
	return &c, nil
}

// RunComparison returns the comparison stored with a run; [ErrNotFound]
// when it has none.
func (s *Store) RunComparison(ctx context.Context, runID string) (*discoveryv1.RunComparison, error) {
	c, err := scanComparison(s.pool.QueryRow(ctx, `SELECT `+comparisonColumns+` FROM run_comparisons WHERE run_id::text = $1`, runID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, &NotFoundError{Kind: KindComparison, ID: runID}
	}
	if err != nil {
		return nil, fmt.Errorf("store: run comparison: %w", err)
	}
	return c, nil
}

// LatestComparison returns the pair's newest comparison, of generation gen
// (0: of any); [ErrNotFound] when none is stored.
func (s *Store) LatestComparison(ctx context.Context, serverID, audienceClass string, gen int64) (*discoveryv1.RunComparison, error) {
	q := `SELECT ` + comparisonColumns + ` FROM run_comparisons WHERE server_id = $1 AND audience_class = $2`
	args := []any{serverID, audienceClass}
	id := PointerID(serverID, audienceClass)
	if gen > 0 {
		q += ` AND generation = $3`
		args = append(args, gen)
		id = GenerationID(serverID, audienceClass, gen)
	}
	c, err := scanComparison(s.pool.QueryRow(ctx, q+` ORDER BY compared_at DESC, run_id DESC LIMIT 1`, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, &NotFoundError{Kind: KindComparison, ID: id}
	}
	if err != nil {
		return nil, fmt.Errorf("store: run comparison: %w", err)
	}
	return c, nil
}

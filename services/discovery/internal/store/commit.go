package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/services/discovery/candidate"
	"github.com/toolcrib/toolcrib/services/discovery/internal/comparison"
)

// Expected is where the pointer was when the scan started: the CAS compares
// both the generation and the change-log revision of the pointer's last
// move, so a pointer that moved away and back (A-B-A) still fails it. The
// zero value means the pointer did not exist.
type Expected struct {
	Generation int64
	Revision   int64
}

// ScanView is what a scan needs to know about its pointer at start.
type ScanView struct {
	// Expected is the CAS expectation.
	Expected Expected
	// Active is true when the pointer names an active (not closed)
	// generation; the fields below describe that generation.
	Active            bool
	SourceRevision    string
	PageRoot          string
	IdentityDigest    string
	TrustConfigDigest string
	SnapshotState     catalogv1.DiscoveryState
	// Listening says the pair is in listen_pairs (see [Store.SetListening]).
	Listening bool
}

// viewSQL reads the [ScanView] of ($1, $2): one row, whether the pointer
// exists or not.
const viewSQL = `SELECT p.generation, p.revision, p.state, s.source_revision, s.page_root, s.identity_digest,
s.trust_config_digest, s.state,
EXISTS (SELECT 1 FROM listen_pairs l WHERE l.server_id = $1 AND l.audience_class = $2)
FROM (SELECT 1) one LEFT JOIN (pointers p JOIN snapshots s USING (server_id, audience_class, generation))
  ON p.server_id = $1 AND p.audience_class = $2`

// scanView reads a row of [viewSQL].
func scanView(row pgx.Row) (ScanView, error) {
	var v ScanView
	var gen, rev *int64
	var state, source, root, identity, trust, snapState *string
	if err := row.Scan(&gen, &rev, &state, &source, &root, &identity, &trust, &snapState, &v.Listening); err != nil {
		return ScanView{}, fmt.Errorf("store: pointer view: %w", err)
	}
	if gen == nil {
		return v, nil
	}
	v.Expected = Expected{Generation: *gen, Revision: *rev}
	v.Active = *state == "ACTIVE"
	v.SourceRevision, v.PageRoot, v.IdentityDigest, v.TrustConfigDigest = *source, *root, *identity, *trust
	v.SnapshotState = stateValue(*snapState)
	return v, nil
}

// View returns the scan view of a pointer (the zero view, but for
// Listening, when none exists).
func (s *Store) View(ctx context.Context, serverID, audienceClass string) (ScanView, error) {
	return scanView(s.pool.QueryRow(ctx, viewSQL, serverID, audienceClass))
}

// Commit is one candidate offered to the pointer CAS.
type Commit struct {
	// RunID is the run that produced it.
	RunID string
	// Expected is the pointer as observed at scan start.
	Expected Expected
	// Snapshot is the snapshot to write: every field but generation and
	// snapshot_digest, which the commit fills; its tools carry their raw
	// JSON and digests.
	Snapshot *catalogv1.Snapshot
	// State is the committed state: ELIGIBLE (proven) or
	// UNVERSIONED_OBSERVATION.
	State catalogv1.DiscoveryState
	// Run is the run's end record (state and generation are set by the
	// commit).
	Run RunEnd
	// JobID, when set, is the queue job the scan runs in: it is completed
	// in the commit's transaction, with the group's change-log append
	// ([completeJobsSQL]), so a TriggerScan right after the run ended
	// queues a new scan instead of finding this one still queued.
	JobID int64
	// InTx, when set, runs inside the commit's transaction, before the
	// change-log append (atomically with the commit; an error fails this
	// commit alone).
	InTx func(context.Context, pgx.Tx) error
}

// Committed is the outcome of a successful commit.
type Committed struct {
	Pointer *discoveryv1.ActivePointer
	Receipt *catalogv1.CatalogReceipt
}

// Commit is the one acceptance point (see the package doc). It returns
// [ErrCASConflict] when the pointer is no longer at c.Expected; nothing is
// written then (the caller records the run's end separately).
func (s *Store) Commit(ctx context.Context, c Commit) (*Committed, error) {
	var out *Committed
	var ended *EndedRun
	ch, err := s.group.commit(ctx, c.Snapshot.GetServerId(), c.Snapshot.GetAudienceClass(), func(ctx context.Context, tx pgx.Tx) (*pendingChange, error) {
		// 1. The CAS; now is the transaction's time, used for every
		// timestamp the commit writes.
		gen, now, err := casPointer(ctx, tx, c)
		if err != nil {
			return nil, err
		}
		// 2. The immutable snapshot, its tools and its lifecycle row, and 3.
		// the previous generation retired; the same round trip reads what
		// the generation is compared with (the static tool list, the
		// previous generation's tools), and the comparison is stored with
		// the run.
		// 4. The run's end goes in the same round trip.
		var ref reference
		digest, fin, err := writeSnapshot(ctx, tx, c, gen, now, &ref)
		if err != nil {
			return nil, err
		}
		if err := writeComparison(ctx, tx, compareCommit(c, gen, &ref, now)); err != nil {
			return nil, err
		}
		// The run's pages beyond what its statement wrote, and the
		// caller's part (the queue job).
		if ended, err = fin.rest(ctx, tx); err != nil {
			return nil, err
		}
		if c.InTx != nil {
			if err := c.InTx(ctx, tx); err != nil {
				return nil, err
			}
		}
		// 5. Change log and receipt, last, with the group's (see group.go):
		// from the append to the commit every other commit waits.
		var ch *pendingChange
		out, ch = activateChange(c, gen, digest, now)
		ch.job = c.JobID
		return ch, nil
	})
	if err != nil {
		return nil, err
	}
	out.Pointer.Revision = ch.rev
	s.ended(ended)
	s.moved(out)
	return out, nil
}

// casPointer moves the pointer from c.Expected to the next generation (or
// creates it at generation 1) and returns that generation and the
// transaction's time; [ErrCASConflict] when the pointer is elsewhere.
func casPointer(ctx context.Context, tx pgx.Tx, c Commit) (int64, time.Time, error) {
	snap := c.Snapshot
	server, aud, expires := snap.GetServerId(), snap.GetAudienceClass(), snap.GetExpiresAt().AsTime()
	var gen int64
	var now time.Time
	var err error
	if c.Expected.Generation == 0 {
		err = tx.QueryRow(ctx, `INSERT INTO pointers (server_id, audience_class, tenant_id, generation, last_generation, state, moved_at, fresh_until, revision)
VALUES ($1, $2, $3, 1, 1, 'ACTIVE', now(), $4, 0) ON CONFLICT DO NOTHING RETURNING generation, moved_at`,
			server, aud, snap.GetTenant(), expires).Scan(&gen, &now)
	} else {
		err = tx.QueryRow(ctx, `UPDATE pointers SET generation = last_generation + 1, last_generation = last_generation + 1,
state = 'ACTIVE', moved_at = now(), fresh_until = $5
WHERE server_id = $1 AND audience_class = $2 AND generation = $3 AND revision = $4 RETURNING generation, moved_at`,
			server, aud, c.Expected.Generation, c.Expected.Revision, expires).Scan(&gen, &now)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, now, ErrCASConflict
	}
	if err != nil {
		return 0, now, fmt.Errorf("store: pointer CAS: %w", err)
	}
	return gen, now, nil
}

// writeSnapshot stamps the snapshot with its generation, state and digest
// and writes it, its generation row, the previous generation's retirement
// and the run's end (see [queueFinishRun]) in one round trip, with the
// reads of ref, then its tools; it returns the digest and the run's end.
func writeSnapshot(ctx context.Context, tx pgx.Tx, c Commit, gen int64, now time.Time, ref *reference) (string, *finishing, error) {
	snap := c.Snapshot
	server, aud, expires := snap.GetServerId(), snap.GetAudienceClass(), snap.GetExpiresAt().AsTime()
	snap.Generation = gen
	snap.State = c.State
	snap.RunId = c.RunID
	snap.Schema = "toolCatalogSnapshot.v1"
	digest, err := candidate.SnapshotDigest(snap, c.State)
	if err != nil {
		return "", nil, err
	}
	snap.SnapshotDigest = digest
	var b pgx.Batch
	b.Queue(`INSERT INTO snapshots (server_id, audience_class, generation, tenant_id, run_id, state,
identity_digest, endpoint_digest, protocol_version, discovery_started_at, expires_at, policy_epoch, source_revision,
page_root, page_digests, cache_scope, trust_config_digest, snapshot_digest, tool_count, committed_at)
VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19,$20)`,
		server, aud, gen, snap.GetTenant(), c.RunID, stateName(c.State), snap.GetIdentityDigest(), snap.GetEndpointDigest(),
		snap.GetProtocolVersion(), snap.GetDiscoveryStartedAt().AsTime(), expires, snap.GetPolicyEpoch(), snap.GetSourceRevision(),
		snap.GetPageRoot(), nonNil(snap.GetPageDigests()), snap.GetCacheScope(), snap.GetTrustConfigDigest(), digest,
		len(snap.GetTools()), now)
	b.Queue(`INSERT INTO generations (server_id, audience_class, generation, fresh_until) VALUES ($1,$2,$3,$4)`,
		server, aud, gen, expires)
	if prev := c.Expected.Generation; prev != 0 {
		b.Queue(`UPDATE generations SET retired_at = $4
WHERE server_id = $1 AND audience_class = $2 AND generation = $3 AND retired_at IS NULL`, server, aud, prev, now)
	}
	ref.queue(&b, server, aud, c.Expected.Generation)
	fin, err := queueFinishRun(&b, c.RunID, committedRun(c, gen))
	if err != nil {
		return "", nil, err
	}
	tools := snap.GetTools()
	small := len(tools) <= inlineRows
	if small && len(tools) > 0 {
		if err := queueTools(&b, server, aud, gen, tools); err != nil {
			return "", nil, err
		}
	}
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return "", nil, fmt.Errorf("store: snapshot: %w", err)
	}
	if small {
		return digest, fin, nil
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"snapshot_tools"},
		[]string{"server_id", "audience_class", "generation", "ordinal", "name", "tool_id", "descriptor_digest",
			"input_schema_digest", "output_schema_digest", "schema_dialect", "flags", "raw"},
		&toolRows{server: server, aud: aud, gen: gen, tools: snap.GetTools()}); err != nil {
		return "", nil, fmt.Errorf("store: snapshot tools: %w", err)
	}
	return digest, fin, nil
}

// inlineRows is the most rows a commit writes with one INSERT from arrays
// in a round trip it makes anyway (a snapshot's tools in its batch, a run's
// pages in its end); larger sets go by COPY, which costs round trips of its
// own (a fleet's commits are mostly of a handful of tools and pages) but
// encodes many rows more cheaply.
const inlineRows = 256

// queueTools queues the INSERT of a snapshot's tools (at most
// [inlineRows]) from one array per column. flags is text[] per tool, and
// Postgres arrays must be rectangular, so each tool's flags travel as a
// JSON array.
func queueTools(b *pgx.Batch, server, aud string, gen int64, tools []*catalogv1.ToolDescriptor) error {
	n := len(tools)
	ordinal := make([]int32, n)
	name, id, desc, input, output, dialect, flags := make([]string, n), make([]string, n), make([]string, n),
		make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	raw := make([][]byte, n)
	for i, t := range tools {
		fj, err := json.Marshal(nonNil(t.GetFlags()))
		if err != nil {
			return fmt.Errorf("store: snapshot tool flags: %w", err)
		}
		ordinal[i], name[i], id[i], desc[i] = int32(i), t.GetName(), t.GetToolId(), t.GetDescriptorDigest()
		input[i], output[i], dialect[i], flags[i], raw[i] = t.GetInputSchemaDigest(), t.GetOutputSchemaDigest(), t.GetSchemaDialect(), string(fj), t.GetRaw()
	}
	b.Queue(`INSERT INTO snapshot_tools (server_id, audience_class, generation, ordinal, name, tool_id, descriptor_digest,
input_schema_digest, output_schema_digest, schema_dialect, flags, raw)
SELECT $1, $2, $3, t.ordinal, t.name, t.tool_id, t.descriptor_digest, t.input_schema_digest, t.output_schema_digest,
t.schema_dialect, ARRAY(SELECT f FROM jsonb_array_elements_text(t.flags::jsonb) WITH ORDINALITY AS e(f, i) ORDER BY i), t.raw
FROM unnest($4::integer[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::bytea[])
  AS t(ordinal, name, tool_id, descriptor_digest, input_schema_digest, output_schema_digest, schema_dialect, flags, raw)`,
		server, aud, gen, ordinal, name, id, desc, input, output, dialect, flags, raw)
	return nil
}

// committedRun is the run's end record of a commit at generation gen.
func committedRun(c Commit, gen int64) RunEnd {
	run := c.Run
	run.State = catalogv1.DiscoveryState_DISCOVERY_STATE_ELIGIBLE
	if c.State == catalogv1.DiscoveryState_DISCOVERY_STATE_UNVERSIONED_OBSERVATION {
		run.State = c.State
	}
	run.Generation = gen
	return run
}

// activateChange is the ACTIVATE change and its catalog receipt.
func activateChange(c Commit, gen int64, digest string, now time.Time) (*Committed, *pendingChange) {
	snap := c.Snapshot
	server, aud, expires := snap.GetServerId(), snap.GetAudienceClass(), snap.GetExpiresAt().AsTime()
	ptr := &discoveryv1.ActivePointer{
		ServerId: server, AudienceClass: aud, TenantId: snap.GetTenant(), Generation: gen,
		State: discoveryv1.PointerState_POINTER_STATE_ACTIVE, SnapshotState: c.State,
		MovedAt: timestamppb.New(now), FreshUntil: timestamppb.New(expires),
		SourceRevision: snap.GetSourceRevision(), PageRoot: snap.GetPageRoot(),
	}
	rcpt := &catalogv1.CatalogReceipt{
		ReceiptId: newUUID(), ServerId: server, AudienceClass: aud, Generation: gen,
		PreviousGeneration: c.Expected.Generation, SourceRevision: snap.GetSourceRevision(), PageRoot: snap.GetPageRoot(),
		SnapshotDigest: digest, PolicyEpoch: snap.GetPolicyEpoch(), AcceptedAt: timestamppb.New(now), RunId: c.RunID,
		Move: catalogv1.PointerMove_POINTER_MOVE_ACTIVATE,
	}
	return &Committed{Pointer: ptr, Receipt: rcpt}, &pendingChange{ptr: ptr, rcpt: rcpt}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// toolRows feeds COPY from the snapshot's tools without building [][]any.
type toolRows struct {
	server, aud string
	gen         int64
	tools       []*catalogv1.ToolDescriptor
	i           int
	row         []any
}

func (r *toolRows) Next() bool {
	r.i++
	return r.i <= len(r.tools)
}

func (r *toolRows) Values() ([]any, error) {
	t := r.tools[r.i-1]
	flags := t.GetFlags()
	if flags == nil {
		flags = []string{}
	}
	if r.row == nil {
		r.row = make([]any, 12)
	}
	r.row[0], r.row[1], r.row[2], r.row[3] = r.server, r.aud, r.gen, int32(r.i-1)
	r.row[4], r.row[5], r.row[6] = t.GetName(), t.GetToolId(), t.GetDescriptorDigest()
	r.row[7], r.row[8], r.row[9] = t.GetInputSchemaDigest(), t.GetOutputSchemaDigest(), t.GetSchemaDialect()
	r.row[10], r.row[11] = flags, t.GetRaw()
	return r.row, nil
}

func (r *toolRows) Err() error { return nil }

// Refresh is the commit of a rescan that proved the active generation
// again (same source revision and page root): by the same CAS it extends
// the freshness of the pointer and its generation to freshUntil, appends a
// REFRESH change and ends the run (unchanged, confirming the generation).
// [ErrCASConflict] when the pointer moved or is closed.
//
// When the pair has a static tool list that the generation was not yet
// compared with at its current version, the refresh stores that
// comparison with the run (tools are the catalog the run proved: the
// generation's tools).
func (s *Store) Refresh(ctx context.Context, runID string, serverID, audienceClass string, exp Expected, freshUntil time.Time, policyEpoch int64, run RunEnd, tools func() []comparison.Tool, jobID int64, inTx func(context.Context, pgx.Tx) error) (*Committed, error) {
	var out *Committed
	var ended *EndedRun
	ch, err := s.group.commit(ctx, serverID, audienceClass, func(ctx context.Context, tx pgx.Tx) (*pendingChange, error) {
		var now time.Time
		var staticVersion *int64
		var entries []byte
		var compared bool
		// The transaction's time, and the static list when the generation
		// was not compared with its current version yet.
		// (The entries only then: a list can be large, refreshes are many.)
		if err := tx.QueryRow(ctx, `SELECT now(), l.version, CASE WHEN c.x IS NULL THEN l.entries END, c.x IS NOT NULL
FROM (SELECT 1) one LEFT JOIN static_tool_lists l ON l.server_id = $1 AND l.audience_class = $2
LEFT JOIN LATERAL (SELECT 1 AS x FROM run_comparisons r WHERE r.server_id = $1 AND r.audience_class = $2
  AND r.generation = $3 AND r.static_version = l.version LIMIT 1) c ON true`,
			serverID, audienceClass, exp.Generation).Scan(&now, &staticVersion, &entries, &compared); err != nil {
			return nil, err
		}
		ptr := &discoveryv1.ActivePointer{ServerId: serverID, AudienceClass: audienceClass, State: discoveryv1.PointerState_POINTER_STATE_ACTIVE}
		var movedAt, fresh time.Time
		var snapState, digest string
		err := tx.QueryRow(ctx, `WITH p AS (
  UPDATE pointers SET fresh_until = greatest(fresh_until, $5)
  WHERE server_id = $1 AND audience_class = $2 AND generation = $3 AND revision = $4 AND state = 'ACTIVE'
  RETURNING tenant_id, generation, moved_at, fresh_until)
SELECT p.tenant_id, p.generation, p.moved_at, p.fresh_until, s.state, s.source_revision, s.page_root, s.snapshot_digest
FROM p JOIN snapshots s ON s.server_id = $1 AND s.audience_class = $2 AND s.generation = p.generation`,
			serverID, audienceClass, exp.Generation, exp.Revision, freshUntil).
			Scan(&ptr.TenantId, &ptr.Generation, &movedAt, &fresh, &snapState, &ptr.SourceRevision, &ptr.PageRoot, &digest)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, ErrCASConflict
		}
		if err != nil {
			return nil, fmt.Errorf("store: refresh CAS: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE generations SET fresh_until = greatest(fresh_until, $4)
WHERE server_id = $1 AND audience_class = $2 AND generation = $3`, serverID, audienceClass, exp.Generation, freshUntil); err != nil {
			return nil, fmt.Errorf("store: refresh generation: %w", err)
		}
		ptr.MovedAt, ptr.FreshUntil, ptr.SnapshotState = timestamppb.New(movedAt), timestamppb.New(fresh), stateValue(snapState)
		if staticVersion != nil && !compared && tools != nil {
			var static []comparison.Entry
			if err := json.Unmarshal(entries, &static); err != nil {
				return nil, err
			}
			if err := refreshComparison(ctx, tx, runID, serverID, audienceClass, ptr.TenantId, exp.Generation, *staticVersion,
				comparison.AgainstStatic(static, tools()), now); err != nil {
				return nil, err
			}
		}
		run.ConfirmedGeneration = exp.Generation
		run.Reason = discoveryv1.RunReason_RUN_REASON_UNCHANGED
		if ended, err = finishRun(ctx, tx, runID, run); err != nil {
			return nil, err
		}
		if inTx != nil {
			if err := inTx(ctx, tx); err != nil {
				return nil, err
			}
		}
		rcpt := &catalogv1.CatalogReceipt{
			ReceiptId: newUUID(), ServerId: serverID, AudienceClass: audienceClass, Generation: exp.Generation,
			PreviousGeneration: exp.Generation, SourceRevision: ptr.SourceRevision, PageRoot: ptr.PageRoot,
			SnapshotDigest: digest, PolicyEpoch: policyEpoch, AcceptedAt: timestamppb.New(now), RunId: runID,
			Move: catalogv1.PointerMove_POINTER_MOVE_REFRESH,
		}
		out = &Committed{Pointer: ptr, Receipt: rcpt}
		return &pendingChange{ptr: ptr, rcpt: rcpt, job: jobID}, nil
	})
	if err != nil {
		return nil, err
	}
	out.Pointer.Revision = ch.rev
	s.ended(ended)
	s.moved(out)
	return out, nil
}

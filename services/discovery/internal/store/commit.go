package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
	// LastGeneration is the pointer's last generation (the highest it
	// ever had) when Generation is not zero: with it the commit knows the
	// generation it creates (LastGeneration + 1) before its CAS and does
	// its CAS and its writes in one statement. Zero when unknown: the
	// commit then reads it in its transaction first. The CAS compares it
	// too, so a wrong value can only lose the CAS, never write a snapshot
	// under another generation.
	LastGeneration int64
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
const viewSQL = `SELECT p.generation, p.revision, p.last_generation, p.state, s.source_revision, s.page_root, s.identity_digest,
s.trust_config_digest, s.state,
EXISTS (SELECT 1 FROM listen_pairs l WHERE l.server_id = $1 AND l.audience_class = $2)
FROM (SELECT 1) one LEFT JOIN (pointers p JOIN snapshots s USING (server_id, audience_class, generation))
  ON p.server_id = $1 AND p.audience_class = $2`

// scanView reads a row of [viewSQL].
func scanView(row pgx.Row) (ScanView, error) {
	var v ScanView
	var gen, rev, last *int64
	var state, source, root, identity, trust, snapState *string
	if err := row.Scan(&gen, &rev, &last, &state, &source, &root, &identity, &trust, &snapState, &v.Listening); err != nil {
		return ScanView{}, fmt.Errorf("store: pointer view: %w", err)
	}
	if gen == nil {
		return v, nil
	}
	v.Expected = Expected{Generation: *gen, Revision: *rev, LastGeneration: *last}
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
		// 1. The CAS; 2. the immutable snapshot, its tools and its
		// lifecycle row; 3. the previous generation retired; 4. the run's
		// end with its pages: one statement, every write conditional on the
		// CAS (see [writeCommit]). It also reads what the generation is
		// compared with (the static tool list, the previous generation's
		// tools), and the comparison is stored with the run. now is the
		// transaction's time, used for every timestamp the commit writes.
		var ref reference
		gen, now, digest, fin, err := writeCommit(ctx, tx, c, &ref)
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

// writeCommit is a commit's CAS and writes, in one statement whose every
// write is conditional on the CAS: the pointer moved from c.Expected to
// the next generation (or created at generation 1), the snapshot stamped
// with that generation, its state and digest, its generation row, the
// previous generation's retirement, its tools (at most [inlineRows]; more
// go by COPY once the CAS won) and the run's end with its pages (likewise).
// The generation is known before the CAS (1, or c.Expected.LastGeneration
// + 1, which the CAS compares), so the snapshot's digest is made before
// the statement. The statement also reads ref (the static tool list, the
// previous generation's tools). It returns the generation, the
// transaction's time, the digest and the run's end; [ErrCASConflict] when
// the pointer is elsewhere (then nothing was written).
//
// One statement instead of one per table: each statement costs Postgres
// a parse, bind and execution start and the process an encoding and a
// message (issue 27).
func writeCommit(ctx context.Context, tx pgx.Tx, c Commit, ref *reference) (int64, time.Time, string, *finishing, error) {
	snap := c.Snapshot
	server, aud, expires := snap.GetServerId(), snap.GetAudienceClass(), snap.GetExpiresAt().AsTime()
	prev, last := c.Expected.Generation, c.Expected.LastGeneration
	var zero time.Time
	if prev != 0 && last == 0 {
		err := tx.QueryRow(ctx, `SELECT last_generation FROM pointers
WHERE server_id = $1 AND audience_class = $2 AND generation = $3 AND revision = $4`,
			server, aud, prev, c.Expected.Revision).Scan(&last)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, zero, "", nil, ErrCASConflict
		}
		if err != nil {
			return 0, zero, "", nil, fmt.Errorf("store: pointer CAS: %w", err)
		}
	}
	gen := last + 1
	snap.Generation = gen
	snap.State = c.State
	snap.RunId = c.RunID
	snap.Schema = "toolCatalogSnapshot.v1"
	digest, err := candidate.SnapshotDigest(snap, c.State)
	if err != nil {
		return 0, zero, "", nil, err
	}
	snap.SnapshotDigest = digest
	run := committedRun(c, gen)
	fin, args, err := finishRunArgs(c.RunID, run)
	if err != nil {
		return 0, zero, "", nil, err
	}
	// The run's end takes $1–$19 (and its pages $20–$28); the rest are
	// numbered as they are added.
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	ps, pa, pg, pe, pt := arg(server), arg(aud), arg(gen), arg(expires), arg(snap.GetTenant())
	var pp string
	if prev != 0 {
		pp = arg(prev)
	}
	var q strings.Builder
	if prev == 0 {
		q.WriteString(`WITH cas AS (INSERT INTO pointers (server_id, audience_class, tenant_id, generation, last_generation, state,
  moved_at, fresh_until, revision)
  VALUES (` + ps + `, ` + pa + `, ` + pt + `, ` + pg + `, ` + pg + `, 'ACTIVE', now(), ` + pe + `, 0)
  ON CONFLICT DO NOTHING RETURNING moved_at)`)
	} else {
		q.WriteString(`WITH cas AS (UPDATE pointers SET generation = ` + pg + `, last_generation = ` + pg + `, state = 'ACTIVE',
  moved_at = now(), fresh_until = ` + pe + `
  WHERE server_id = ` + ps + ` AND audience_class = ` + pa + ` AND generation = ` + pp + ` AND revision = ` + arg(c.Expected.Revision) + `
    AND last_generation = ` + arg(last) + ` RETURNING moved_at),
retire AS (UPDATE generations SET retired_at = now()
  WHERE server_id = ` + ps + ` AND audience_class = ` + pa + ` AND generation = ` + pp + ` AND retired_at IS NULL
    AND EXISTS (SELECT 1 FROM cas))`)
	}
	q.WriteString(`,
snap AS (INSERT INTO snapshots (server_id, audience_class, generation, tenant_id, run_id, state, identity_digest,
  endpoint_digest, protocol_version, discovery_started_at, expires_at, policy_epoch, source_revision, page_root,
  page_digests, cache_scope, trust_config_digest, snapshot_digest, tool_count, committed_at)
  SELECT ` + ps + `, ` + pa + `, ` + pg + `, ` + pt + `, ` + arg(c.RunID) + `::uuid, ` +
		arg(stateName(c.State)) + `::text, ` + arg(snap.GetIdentityDigest()) + `::text, ` + arg(snap.GetEndpointDigest()) + `::text, ` +
		arg(snap.GetProtocolVersion()) + `::text, ` + arg(snap.GetDiscoveryStartedAt().AsTime()) + `::timestamptz, ` + pe + `, ` +
		arg(snap.GetPolicyEpoch()) + `::bigint, ` + arg(snap.GetSourceRevision()) + `::text, ` + arg(snap.GetPageRoot()) + `::text, ` +
		arg(nonNil(snap.GetPageDigests())) + `::text[], ` + arg(snap.GetCacheScope()) + `::text, ` + arg(snap.GetTrustConfigDigest()) + `::text, ` +
		arg(digest) + `::text, ` + arg(len(snap.GetTools())) + `::integer, moved_at FROM cas),
gens AS (INSERT INTO generations (server_id, audience_class, generation, fresh_until)
  SELECT ` + ps + `, ` + pa + `, ` + pg + `, ` + pe + ` FROM cas)`)
	tools := snap.GetTools()
	small := len(tools) <= inlineRows
	if small && len(tools) > 0 {
		cols, err := toolColumns(tools)
		if err != nil {
			return 0, zero, "", nil, err
		}
		q.WriteString(`,
tools AS (INSERT INTO snapshot_tools (server_id, audience_class, generation, ordinal, name, tool_id, descriptor_digest,
  input_schema_digest, output_schema_digest, schema_dialect, flags, raw)
  SELECT ` + ps + `, ` + pa + `, ` + pg + `, t.ordinal, t.name, t.tool_id, t.descriptor_digest, t.input_schema_digest,
  t.output_schema_digest, t.schema_dialect,
  ARRAY(SELECT f FROM jsonb_array_elements_text(t.flags::jsonb) WITH ORDINALITY AS e(f, i) ORDER BY i), t.raw
  FROM unnest(` + arg(cols.ordinal) + `::integer[], ` + arg(cols.name) + `::text[], ` + arg(cols.id) + `::text[], ` +
			arg(cols.desc) + `::text[], ` + arg(cols.input) + `::text[], ` + arg(cols.output) + `::text[], ` + arg(cols.dialect) + `::text[], ` +
			arg(cols.flags) + `::text[], ` + arg(cols.raw) + `::bytea[])
    AS t(ordinal, name, tool_id, descriptor_digest, input_schema_digest, output_schema_digest, schema_dialect, flags, raw)
  WHERE EXISTS (SELECT 1 FROM cas))`)
	}
	q.WriteString(`,
ended AS (` + finishRunSet + ` AND EXISTS (SELECT 1 FROM cas)` + finishRunReturning + `)`)
	if inlinePages(run) {
		q.WriteString(`,
pages AS (` + runPagesSQL + `)`)
	}
	q.WriteString(`
SELECT (SELECT moved_at FROM cas), e.server_id, e.audience_class, e.took, l.version, l.entries`)
	if prev != 0 {
		q.WriteString(`, prev_tools.names, prev_tools.descriptors, prev_tools.inputs`)
	}
	q.WriteString(`
FROM (SELECT 1) one LEFT JOIN ended e ON true
LEFT JOIN static_tool_lists l ON l.server_id = ` + ps + ` AND l.audience_class = ` + pa)
	if prev != 0 {
		q.WriteString(`
LEFT JOIN LATERAL (SELECT array_agg(t.name ORDER BY t.ordinal) AS names,
  array_agg(t.descriptor_digest ORDER BY t.ordinal) AS descriptors, array_agg(t.input_schema_digest ORDER BY t.ordinal) AS inputs
  FROM snapshot_tools t WHERE t.server_id = ` + ps + ` AND t.audience_class = ` + pa + ` AND t.generation = ` + pp + `) prev_tools ON true`)
	}
	var movedAt *time.Time
	var endServer, endAud *string
	var took *float64
	var staticVersion *int64
	var entries []byte
	var names, descs, inputs []string
	dest := []any{&movedAt, &endServer, &endAud, &took, &staticVersion, &entries}
	if prev != 0 {
		dest = append(dest, &names, &descs, &inputs)
	}
	if err := tx.QueryRow(ctx, q.String(), args...).Scan(dest...); err != nil {
		return 0, zero, "", nil, fmt.Errorf("store: commit: %w", err)
	}
	if movedAt == nil {
		return 0, zero, "", nil, ErrCASConflict
	}
	fin.matchedAs(endServer, endAud, took)
	if staticVersion != nil {
		ref.staticVersion = *staticVersion
		if err := json.Unmarshal(entries, &ref.static); err != nil {
			return 0, zero, "", nil, fmt.Errorf("store: static tool list: %w", err)
		}
	}
	for i := range names {
		ref.previous = append(ref.previous, comparison.Tool{Name: names[i], DescriptorDigest: descs[i], InputSchemaDigest: inputs[i]})
	}
	if !small {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"snapshot_tools"},
			[]string{"server_id", "audience_class", "generation", "ordinal", "name", "tool_id", "descriptor_digest",
				"input_schema_digest", "output_schema_digest", "schema_dialect", "flags", "raw"},
			&toolRows{server: server, aud: aud, gen: gen, tools: tools}); err != nil {
			return 0, zero, "", nil, fmt.Errorf("store: snapshot tools: %w", err)
		}
	}
	return gen, *movedAt, digest, fin, nil
}

// inlineRows is the most rows a commit writes with one INSERT from arrays
// in a round trip it makes anyway (a snapshot's tools in its batch, a run's
// pages in its end); larger sets go by COPY, which costs round trips of its
// own (a fleet's commits are mostly of a handful of tools and pages) but
// encodes many rows more cheaply.
const inlineRows = 256

// toolColumnSet is a snapshot's tools (at most [inlineRows]) as one array
// per snapshot_tools column, written by one INSERT from unnest. flags is
// text[] per tool, and Postgres arrays must be rectangular, so each tool's
// flags travel as a JSON array.
type toolColumnSet struct {
	ordinal                                       []int32
	name, id, desc, input, output, dialect, flags []string
	raw                                           [][]byte
}

func toolColumns(tools []*catalogv1.ToolDescriptor) (toolColumnSet, error) {
	n := len(tools)
	c := toolColumnSet{ordinal: make([]int32, n), name: make([]string, n), id: make([]string, n), desc: make([]string, n),
		input: make([]string, n), output: make([]string, n), dialect: make([]string, n), flags: make([]string, n), raw: make([][]byte, n)}
	for i, t := range tools {
		fj, err := json.Marshal(nonNil(t.GetFlags()))
		if err != nil {
			return toolColumnSet{}, fmt.Errorf("store: snapshot tool flags: %w", err)
		}
		c.ordinal[i], c.name[i], c.id[i], c.desc[i] = int32(i), t.GetName(), t.GetToolId(), t.GetDescriptorDigest()
		c.input[i], c.output[i], c.dialect[i], c.flags[i], c.raw[i] = t.GetInputSchemaDigest(), t.GetOutputSchemaDigest(), t.GetSchemaDialect(), string(fj), t.GetRaw()
	}
	return c, nil
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

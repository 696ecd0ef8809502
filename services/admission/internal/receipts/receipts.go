package receipts

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	"github.com/toolcrib/toolcrib/platform/backoff"
)

// Errors of the writer.
var (
	// ErrNotFound: no receipt with that id is visible to the principal.
	ErrNotFound = errors.New("receipts: not found")
	// ErrBackpressure: too many receipts wait for Postgres.
	ErrBackpressure = errors.New("receipts: too many receipts are waiting to be stored")
	// ErrClosed: the writer was closed.
	ErrClosed = errors.New("receipts: writer closed")
)

// Options configures a [Writer].
type Options struct {
	BatchSize    int
	Interval     time.Duration
	MaxPending   int
	LookupWindow time.Duration
	// RecentSize is the most stored ALLOW receipts kept readable from
	// memory (within LookupWindow), so that a lookup on the replica that
	// decided a receipt does not read Postgres; older ones are read there.
	RecentSize int
	// MissWait is how long a lookup that finds no receipt the principal
	// may see keeps re-reading Postgres (every Interval) before it answers
	// ErrNotFound: the time another replica may take to store a receipt it
	// decided (its batch interval, with slack). Zero means 3 × Interval;
	// negative means no wait.
	MissWait time.Duration
	// DrainTimeout bounds the final flush in Close.
	DrainTimeout time.Duration
	Logger       *slog.Logger
	Now          func() time.Time
}

// Writer batches receipts to Postgres.
type Writer struct {
	pool *pgxpool.Pool
	o    Options

	mu      sync.Mutex
	queue   []*admissionv1.Receipt // not yet stored, in order
	byID    map[string]*admissionv1.Receipt
	closed  bool
	kick    chan struct{}
	flushMu sync.Mutex // one flush at a time
	// copyBuf is the COPY data of the flush under flushMu; dropped after a
	// failed COPY (see insert).
	copyBuf []byte
	kept    []recentEntry // the flush's stored ALLOWs, under flushMu
	stored  int64
	recent  recent // stored ALLOW receipts, newest last
	lookups [numAnswers]atomic.Int64
}

// Answer is how a [Writer.Lookup] was answered.
type Answer int

// The answers of a lookup, for [Writer.Lookups].
const (
	// FromMemory: queued or among the recent stored receipts.
	FromMemory Answer = iota
	// FromPostgres: read from Postgres at the first try.
	FromPostgres
	// AfterWait: found in Postgres only after a re-read (another replica
	// stored it meanwhile).
	AfterWait
	// NotFound: ErrNotFound after the miss wait.
	NotFound
	numAnswers
)

// String is the metric label of a.
func (a Answer) String() string {
	return [...]string{"memory", "postgres", "after_wait", "not_found"}[a]
}

// Lookups returns how many lookups were answered a since the writer was
// made.
func (w *Writer) Lookups(a Answer) int64 { return w.lookups[a].Load() }

// recent is a bounded first-in first-out set of stored receipts by id.
// Receipts are immutable, so an entry never goes stale; it only ages out
// of the lookup window or is pushed out by newer ones. An entry is the
// receipt's wire form, keyed by its 16-byte id: the map and the bytes hold
// no pointers for the collector to follow. Kept as messages (a dozen
// pointers each, 100,000 of them), they were a large share of every
// collection's marking, which a cached Check paid for in proportion to
// what it allocates.
type recent struct {
	byID map[uuid.UUID]int32 // the ring slot of each id
	ring []recentEntry       // oldest at head
	head int
	n    int
}

// recentEntry is one kept receipt.
type recentEntry struct {
	id   uuid.UUID
	at   int64  // decided_at, Unix nanoseconds
	wire []byte // proto wire form of the receipt
}

// entryOf returns r's entry; false for a receipt without a UUID id.
func entryOf(r *admissionv1.Receipt) (recentEntry, bool) {
	id, err := uuid.Parse(r.GetReceiptId())
	if err != nil {
		return recentEntry{}, false
	}
	wire, err := proto.Marshal(r)
	if err != nil {
		return recentEntry{}, false
	}
	return recentEntry{id: id, at: r.GetDecidedAt().AsTime().UnixNano(), wire: wire}, true
}

func newRecent(size int) recent {
	return recent{byID: make(map[uuid.UUID]int32, min(size, 1024)), ring: make([]recentEntry, size)}
}

// add keeps e, dropping the oldest entry when full.
func (c *recent) add(e recentEntry) {
	if _, ok := c.byID[e.id]; ok || len(c.ring) == 0 {
		return
	}
	if c.n == len(c.ring) {
		c.drop()
	}
	slot := (c.head + c.n) % len(c.ring)
	c.ring[slot] = e
	c.byID[e.id] = int32(slot)
	c.n++
}

// get returns the wire form of the receipt with id.
func (c *recent) get(id uuid.UUID) ([]byte, bool) {
	slot, ok := c.byID[id]
	if !ok {
		return nil, false
	}
	return c.ring[slot].wire, true
}

// drop forgets the oldest entry.
func (c *recent) drop() {
	delete(c.byID, c.ring[c.head].id)
	c.ring[c.head] = recentEntry{}
	c.head = (c.head + 1) % len(c.ring)
	c.n--
}

// expire drops the oldest entries decided before cutoff (entries are kept
// in storage order, close to decision order; one decided late but stored
// early is only dropped later, and Lookup checks the window anyway).
func (c *recent) expire(cutoff time.Time) {
	at := cutoff.UnixNano()
	for c.n > 0 && c.ring[c.head].at < at {
		c.drop()
	}
}

// New returns a writer over pool (search_path = admission).
func New(pool *pgxpool.Pool, o Options) *Writer {
	if o.BatchSize <= 0 {
		o.BatchSize = 500
	}
	if o.Interval <= 0 {
		o.Interval = 50 * time.Millisecond
	}
	if o.MaxPending <= 0 {
		o.MaxPending = 200_000
	}
	if o.LookupWindow <= 0 {
		o.LookupWindow = 5 * time.Minute
	}
	if o.RecentSize <= 0 {
		o.RecentSize = 100_000
	}
	if o.MissWait == 0 {
		o.MissWait = 3 * o.Interval
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Writer{pool: pool, o: o, byID: map[string]*admissionv1.Receipt{}, kick: make(chan struct{}, 1),
		recent: newRecent(o.RecentSize)}
}

// Add queues r. The writer keeps r; the caller must not change it after.
func (w *Writer) Add(r *admissionv1.Receipt) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.closed:
		return ErrClosed
	case len(w.queue) >= w.o.MaxPending:
		return ErrBackpressure
	}
	w.queue = append(w.queue, r)
	w.byID[r.GetReceiptId()] = r
	if len(w.queue) >= w.o.BatchSize {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

// Pending is how many receipts wait for Postgres.
func (w *Writer) Pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queue)
}

// Stored is how many receipts this writer stored.
func (w *Writer) Stored() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stored
}

// Run flushes until ctx ends. Failed batches are retried with back-off.
func (w *Writer) Run(ctx context.Context) error {
	t := time.NewTicker(w.o.Interval)
	defer t.Stop()
	retry := backoff.New(w.o.Interval, 5*time.Second)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-w.kick:
		}
		if err := w.Flush(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			d := retry.Next()
			w.o.Logger.Warn("receipts: batch not stored; retrying", "pending", w.Pending(), "err", err, "retry_in", d)
			if !backoff.Wait(ctx, d) {
				return nil
			}
			continue
		}
		retry.Reset()
	}
}

// Flush stores every queued receipt, batch by batch. On an error the
// unstored receipts stay queued.
func (w *Writer) Flush(ctx context.Context) error {
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	for {
		w.mu.Lock()
		n := min(len(w.queue), w.o.BatchSize)
		batch := w.queue[:n:n]
		w.mu.Unlock()
		if n == 0 {
			return nil
		}
		if err := w.insert(ctx, batch); err != nil {
			return err
		}
		// The stored ALLOWs' entries are encoded before taking the lock
		// that every Check's Add takes.
		kept := w.kept[:0]
		for _, r := range batch {
			if r.GetDecision() == admissionv1.Decision_DECISION_ALLOW {
				if e, ok := entryOf(r); ok {
					kept = append(kept, e)
				}
			}
		}
		w.mu.Lock()
		w.queue = w.queue[n:]
		for _, r := range batch {
			delete(w.byID, r.GetReceiptId())
		}
		for _, e := range kept {
			w.recent.add(e)
		}
		clear(kept)
		w.kept = kept
		w.recent.expire(w.o.Now().Add(-w.o.LookupWindow))
		w.stored += int64(n)
		if len(w.queue) == 0 {
			w.queue = nil
		}
		w.mu.Unlock()
	}
}

// Close refuses further receipts and flushes what is queued, within the
// drain timeout (retrying failed batches meanwhile).
func (w *Writer) Close() error {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), w.o.DrainTimeout)
	defer cancel()
	for {
		err := w.Flush(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			w.o.Logger.Error("receipts: drain ended with receipts not stored", "pending", w.Pending(), "err", err)
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

const insertSQL = `INSERT INTO receipts (receipt_id, tenant_id, subject, tool_id, server_id, audience_class,
  generation, descriptor_digest, policy_epoch, argument_digest, mode, run_id, decision, reason,
  effect_class, decided_at, replica, confirmer, confirmed_at, shown_digest, admitting_grant)
SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
  $7::bigint[], $8::text[], $9::bigint[], $10::text[], $11::smallint[], $12::text[], $13::smallint[],
  $14::smallint[], $15::smallint[], $16::timestamptz[], $17::text[], $18::text[], $19::timestamptz[], $20::text[],
  $21::text[])
ON CONFLICT (receipt_id) DO NOTHING`

// columns are the receipts columns a batch writes (stored_at defaults).
var columns = []string{"receipt_id", "tenant_id", "subject", "tool_id", "server_id", "audience_class",
	"generation", "descriptor_digest", "policy_epoch", "argument_digest", "mode", "run_id", "decision", "reason",
	"effect_class", "decided_at", "replica", "confirmer", "confirmed_at", "shown_digest", "admitting_grant"}

// uniqueViolation is Postgres's SQLSTATE unique_violation.
const uniqueViolation = "23505"

// insert stores a batch with one binary COPY (about half the Postgres
// time of the INSERT … SELECT unnest below, which matters when Postgres
// shares the cores), encoded by [appendRow] into a buffer reused from batch
// to batch (flushes are serialised by flushMu). A batch is one COPY, so it
// is stored whole or not at all; only a retry of a batch whose COPY
// committed but whose answer was lost meets a duplicate id, and then the
// batch goes through the INSERT, which skips the rows already stored.
func (w *Writer) insert(ctx context.Context, batch []*admissionv1.Receipt) error {
	b := append(w.copyBuf[:0], copyHeader...)
	for _, r := range batch {
		var err error
		if b, err = appendRow(b, r); err != nil {
			return err
		}
	}
	b = append(b, copyTrailer...)
	w.copyBuf = b
	conn, err := w.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A fresh reader per batch: when CopyFrom fails on a broken
	// connection it can return before its reading goroutine stops, so
	// after an error neither the reader nor the buffer is reused (the race
	// detector caught the next batch overwriting it mid-read).
	_, err = conn.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(b), copySQL)
	conn.Release()
	if err != nil {
		w.copyBuf = nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == uniqueViolation {
		return w.insertSkippingStored(ctx, batch)
	}
	return err
}

// insertSkippingStored stores the batch's rows that are not stored yet.
func (w *Writer) insertSkippingStored(ctx context.Context, batch []*admissionv1.Receipt) error {
	n := len(batch)
	var (
		ids, tenants, subjects, tools, servers, classes, descs, argds, runs, replicas = mk(n), mk(n), mk(n), mk(n), mk(n), mk(n), mk(n), mk(n), mk(n), mk(n)
		confirmers, shown, admitting                                                  = mk(n), mk(n), mk(n)
		confirmedAt                                                                   = make([]*time.Time, n)
		gens, epochs                                                                  = make([]int64, n), make([]int64, n)
		modes, decisions, reasons, effects                                            = make([]int16, n), make([]int16, n), make([]int16, n), make([]int16, n)
		at                                                                            = make([]time.Time, n)
	)
	for i, r := range batch {
		ids[i], tenants[i], subjects[i], tools[i] = r.GetReceiptId(), r.GetTenantId(), r.GetSubject(), r.GetToolId()
		servers[i], classes[i], descs[i], argds[i] = r.GetServerId(), r.GetAudienceClass(), r.GetDescriptorDigest(), r.GetArgumentDigest()
		runs[i], replicas[i] = r.GetRunId(), r.GetReplica()
		gens[i], epochs[i] = r.GetGeneration(), r.GetPolicyEpoch()
		modes[i], decisions[i], reasons[i], effects[i] = int16(r.GetMode()), int16(r.GetDecision()), int16(r.GetReason()), int16(r.GetEffectClass())
		at[i] = r.GetDecidedAt().AsTime()
		confirmers[i], shown[i], admitting[i] = r.GetConfirmer(), r.GetShownDigest(), r.GetAdmittingGrant()
		if r.GetConfirmedAt() != nil {
			t := r.GetConfirmedAt().AsTime()
			confirmedAt[i] = &t
		}
	}
	_, err := w.pool.Exec(ctx, insertSQL, ids, tenants, subjects, tools, servers, classes, gens, descs, epochs,
		argds, modes, runs, decisions, reasons, effects, at, replicas, confirmers, confirmedAt, shown, admitting)
	return err
}

func mk(n int) []string { return make([]string, n) }

// Lookup returns the receipt id if tenant and subject are the ones it was
// decided for and it is younger than the lookup window; ErrNotFound
// otherwise. A receipt this writer holds (queued, or a stored ALLOW among
// the RecentSize newest) is answered from memory; any other is read from
// Postgres. Receipts decided by another replica reach Postgres only with
// that replica's next batch, so a lookup that finds nothing visible keeps
// re-reading every Interval for MissWait before it answers ErrNotFound
// (every ErrNotFound takes that long, whichever of the three causes: the
// answer's timing says no more than the answer). The caller must not change
// the returned receipt.
func (w *Writer) Lookup(ctx context.Context, id, tenant, subject string) (*admissionv1.Receipt, error) {
	if _, err := uuid.Parse(id); err != nil {
		return nil, ErrNotFound
	}
	deadline := time.Now().Add(w.o.MissWait)
	for tries := 0; ; tries++ {
		r, inMemory, err := w.find(ctx, id)
		switch {
		case err == nil && r.GetTenantId() == tenant && r.GetSubject() == subject &&
			w.o.Now().Sub(r.GetDecidedAt().AsTime()) <= w.o.LookupWindow:
			switch {
			case inMemory && tries == 0:
				w.lookups[FromMemory].Add(1)
			case tries == 0:
				w.lookups[FromPostgres].Add(1)
			default:
				w.lookups[AfterWait].Add(1)
			}
			return r, nil
		case err != nil && !errors.Is(err, ErrNotFound):
			return nil, err
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			w.lookups[NotFound].Add(1)
			return nil, ErrNotFound
		}
		t := time.NewTimer(min(wait, w.o.Interval))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// find returns receipt id from memory (inMemory) or Postgres, whoever it
// belongs to; ErrNotFound if it is in neither. A stored ALLOW read from
// Postgres is kept among the recent ones (another replica's receipt cited
// again).
func (w *Writer) find(ctx context.Context, id string) (r *admissionv1.Receipt, inMemory bool, err error) {
	key, err := uuid.Parse(id)
	if err != nil {
		return nil, false, ErrNotFound
	}
	w.mu.Lock()
	r, ok := w.byID[id]
	var wire []byte
	if !ok {
		wire, ok = w.recent.get(key)
	}
	w.mu.Unlock()
	if ok {
		if r == nil {
			r = &admissionv1.Receipt{}
			if err := proto.Unmarshal(wire, r); err != nil {
				return nil, false, err
			}
		}
		return r, true, nil
	}
	if r, err = w.load(ctx, id); err != nil {
		return nil, false, err
	}
	if r.GetDecision() == admissionv1.Decision_DECISION_ALLOW {
		if e, ok := entryOf(r); ok {
			w.mu.Lock()
			w.recent.add(e)
			w.mu.Unlock()
		}
	}
	return r, false, nil
}

func (w *Writer) load(ctx context.Context, id string) (*admissionv1.Receipt, error) {
	var (
		r                              admissionv1.Receipt
		mode, decision, reason, effect int16
		at                             time.Time
		confirmedAt                    *time.Time
	)
	err := w.pool.QueryRow(ctx, `SELECT receipt_id::text, tenant_id, subject, tool_id, server_id, audience_class,
  generation, descriptor_digest, policy_epoch, argument_digest, mode, run_id, decision, reason, effect_class,
  decided_at, replica, confirmer, confirmed_at, shown_digest, admitting_grant FROM receipts WHERE receipt_id = $1::uuid`, id).Scan(
		&r.ReceiptId, &r.TenantId, &r.Subject, &r.ToolId, &r.ServerId, &r.AudienceClass, &r.Generation,
		&r.DescriptorDigest, &r.PolicyEpoch, &r.ArgumentDigest, &mode, &r.RunId, &decision, &reason, &effect,
		&at, &r.Replica, &r.Confirmer, &confirmedAt, &r.ShownDigest, &r.AdmittingGrant)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	r.Mode = admissionv1.Mode(mode)
	r.Decision = admissionv1.Decision(decision)
	r.Reason = catalogv1.DecisionReason(reason)
	r.EffectClass = catalogv1.EffectClass(effect)
	r.DecidedAt = timestamppb.New(at)
	if confirmedAt != nil {
		r.ConfirmedAt = timestamppb.New(*confirmedAt)
	}
	return &r, nil
}

// MaxSummaryTools bounds the tools of a [Summary].
const MaxSummaryTools = 1000

// Summary counts the stored receipts of one generation of a (server,
// audience class) since a time.
type Summary struct {
	// Checks is every receipt counted, ALLOW or DENY.
	Checks int64
	// Tools are the tools with NOT_FOUND or STALE_CATALOG receipts, most
	// denied first (ties by tool id), at most [MaxSummaryTools].
	Tools []ToolDenials
	// Truncated: more tools had such receipts than Tools holds.
	Truncated bool
}

// ToolDenials counts one tool's missing-tool denials.
type ToolDenials struct {
	ToolID                 string
	NotFound, StaleCatalog int64
}

// Summarize counts, from Postgres only, the receipts of (server, class,
// generation) decided at or after since: receipts still queued on a
// replica are not counted yet.
func (w *Writer) Summarize(ctx context.Context, server, class string, generation int64, since time.Time) (Summary, error) {
	var s Summary
	nf, stale := int16(catalogv1.DecisionReason_DECISION_REASON_NOT_FOUND), int16(catalogv1.DecisionReason_DECISION_REASON_STALE_CATALOG)
	if err := w.pool.QueryRow(ctx, `SELECT count(*) FROM receipts
WHERE server_id = $1 AND audience_class = $2 AND generation = $3 AND decided_at >= $4`,
		server, class, generation, since).Scan(&s.Checks); err != nil {
		return s, err
	}
	rows, err := w.pool.Query(ctx, `SELECT tool_id, count(*) FILTER (WHERE reason = $5), count(*) FILTER (WHERE reason = $6)
FROM receipts WHERE server_id = $1 AND audience_class = $2 AND generation = $3 AND decided_at >= $4 AND reason IN ($5, $6)
GROUP BY tool_id ORDER BY count(*) DESC, tool_id LIMIT $7`, server, class, generation, since, nf, stale, MaxSummaryTools+1)
	if err != nil {
		return s, err
	}
	s.Tools, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (ToolDenials, error) {
		var t ToolDenials
		err := r.Scan(&t.ToolID, &t.NotFound, &t.StaleCatalog)
		return t, err
	})
	if err != nil {
		return s, err
	}
	if len(s.Tools) > MaxSummaryTools {
		s.Tools, s.Truncated = s.Tools[:MaxSummaryTools], true
	}
	return s, nil
}

// ReasonCount is the number of receipts with one decision reason.
type ReasonCount struct {
	Reason catalogv1.DecisionReason
	Count  int64
}

// CountByReason counts, from Postgres only, the receipts of tool decided
// at or after since, per reason in the enum's order (reasons without a
// receipt are left out): every tenant's receipts when allTenants, else
// only tenant's (an empty tenant then counts nothing). Receipts still
// queued on a replica are not counted yet.
func (w *Writer) CountByReason(ctx context.Context, tool, tenant string, allTenants bool, since time.Time) ([]ReasonCount, error) {
	q := `SELECT reason, count(*) FROM receipts WHERE tool_id = $1 AND tenant_id = $2 AND decided_at >= $3
GROUP BY reason ORDER BY reason`
	params := []any{tool, tenant, since}
	if allTenants {
		q = `SELECT reason, count(*) FROM receipts WHERE tool_id = $1 AND decided_at >= $2
GROUP BY reason ORDER BY reason`
		params = []any{tool, since}
	}
	rows, err := w.pool.Query(ctx, q, params...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (ReasonCount, error) {
		var reason int16
		var c ReasonCount
		err := r.Scan(&reason, &c.Count)
		c.Reason = catalogv1.DecisionReason(reason)
		return c, err
	})
}

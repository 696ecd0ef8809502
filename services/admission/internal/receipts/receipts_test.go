package receipts

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/postgres"
	"github.com/toolcrib/toolcrib/services/admission/migrations"
)

func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	url := pgtest.NewDatabase(t, pgtest.Schema{Name: "admission", Sets: []postgres.Set{migrations.Set()}})
	pool, err := postgres.Open(context.Background(), url, "admission")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func receipt(tenant, subject string) *admissionv1.Receipt {
	return &admissionv1.Receipt{
		ReceiptId: uuid.NewString(), Decision: admissionv1.Decision_DECISION_ALLOW,
		Reason: catalogv1.DecisionReason_DECISION_REASON_ALLOW, TenantId: tenant, Subject: subject,
		ToolId: "logistics.shipment_status", ServerId: "logistics", AudienceClass: tenant + ".readers",
		Generation: 7, DescriptorDigest: "sha256:aa", PolicyEpoch: 5, ArgumentDigest: "sha256:bb",
		Mode: admissionv1.Mode_MODE_AUTONOMOUS, RunId: "run-1",
		DecidedAt: timestamppb.New(time.Now().Truncate(time.Microsecond)), Replica: "host:1",
		EffectClass: catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY,
	}
}

func count(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM receipts").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestLookupIsPrincipalBoundAndDoesNotWait(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	w := New(pool, Options{Interval: time.Hour, BatchSize: 1000, MissWait: -1})
	r := receipt("tenant-a", "alice")
	if err := w.Add(r); err != nil {
		t.Fatal(err)
	}
	// Not flushed: answered from memory.
	got, err := w.Lookup(ctx, r.ReceiptId, "tenant-a", "alice")
	if err != nil || !proto.Equal(got, r) {
		t.Fatalf("lookup before flush: %v %v", got, err)
	}
	if count(t, pool) != 0 {
		t.Fatal("stored before the flush")
	}
	check := func(when string) {
		for _, who := range [][2]string{{"tenant-b", "alice"}, {"tenant-a", "bob"}, {"", ""}} {
			if _, err := w.Lookup(ctx, r.ReceiptId, who[0], who[1]); !errors.Is(err, ErrNotFound) {
				t.Errorf("%s: %v looked up tenant-a/alice's receipt: %v", when, who, err)
			}
		}
	}
	check("in memory")
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if w.Pending() != 0 || count(t, pool) != 1 {
		t.Fatalf("after flush: %d pending, %d stored", w.Pending(), count(t, pool))
	}
	got, err = w.Lookup(ctx, r.ReceiptId, "tenant-a", "alice")
	if err != nil || !proto.Equal(got, r) {
		t.Fatalf("lookup after flush (from memory): %v %v\nwant %v", got, err, r)
	}
	check("stored, in memory")
	// Another writer over the same database holds nothing: Postgres.
	w = New(pool, Options{Interval: time.Hour, BatchSize: 1000, MissWait: -1})
	got, err = w.Lookup(ctx, r.ReceiptId, "tenant-a", "alice")
	if err != nil || !proto.Equal(got, r) || w.Lookups(FromPostgres) != 1 {
		t.Fatalf("lookup from Postgres: %v %v (%d from Postgres)\nwant %v", got, err, w.Lookups(FromPostgres), r)
	}
	w = New(pool, Options{Interval: time.Hour, BatchSize: 1000, MissWait: -1})
	check("in Postgres")
	for _, id := range []string{uuid.NewString(), "not-a-uuid", "'; DROP TABLE receipts; --"} {
		if _, err := w.Lookup(ctx, id, "tenant-a", "alice"); !errors.Is(err, ErrNotFound) {
			t.Errorf("lookup %q: %v", id, err)
		}
	}
	// Short-lived: past the window the receipt is not answered.
	w.o.Now = func() time.Time { return time.Now().Add(w.o.LookupWindow + time.Second) }
	if _, err := w.Lookup(ctx, r.ReceiptId, "tenant-a", "alice"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("old receipt: %v", err)
	}
}

// TestFailedBatchIsRetriedNotLost makes Postgres refuse the insert (the
// table is renamed away), then restores it: every receipt is stored once.
func TestFailedBatchIsRetriedNotLost(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	w := New(pool, Options{Interval: 10 * time.Millisecond, BatchSize: 7})
	if _, err := pool.Exec(ctx, "ALTER TABLE receipts RENAME TO receipts_away"); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- w.Run(runCtx) }()
	ids := map[string]bool{}
	for range 50 {
		r := receipt("tenant-a", "alice")
		ids[r.ReceiptId] = true
		if err := w.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if w.Pending() != 50 {
		t.Fatalf("%d pending while Postgres refuses", w.Pending())
	}
	if _, err := pool.Exec(ctx, "ALTER TABLE receipts_away RENAME TO receipts"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for w.Pending() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	<-done
	if n := count(t, pool); n != 50 || w.Pending() != 0 {
		t.Fatalf("%d stored, %d pending; want 50, 0", n, w.Pending())
	}
	// A retried batch that had committed is not stored twice.
	var r *admissionv1.Receipt
	for id := range ids {
		r = receipt("tenant-a", "alice")
		r.ReceiptId = id
		break
	}
	if err := w.insert(ctx, []*admissionv1.Receipt{r}); err != nil || count(t, pool) != 50 {
		t.Fatalf("re-insert: %v, %d rows", err, count(t, pool))
	}
}

func TestCloseFlushesAndRefusesMore(t *testing.T) {
	pool := newPool(t)
	w := New(pool, Options{Interval: time.Hour, BatchSize: 4})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				if err := w.Add(receipt("tenant-a", fmt.Sprint("s", i))); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n := count(t, pool); n != 200 {
		t.Fatalf("%d of 200 stored on drain", n)
	}
	if err := w.Add(receipt("tenant-a", "x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Add after Close: %v", err)
	}
}

func TestBackpressure(t *testing.T) {
	w := New(nil, Options{MaxPending: 3, Interval: time.Hour})
	for range 3 {
		if err := w.Add(receipt("t", "s")); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Add(receipt("t", "s")); !errors.Is(err, ErrBackpressure) {
		t.Fatalf("4th receipt: %v", err)
	}
}

func TestRunStoresInBatches(t *testing.T) {
	pool := newPool(t)
	w := New(pool, Options{Interval: 5 * time.Millisecond, BatchSize: 100})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { _ = w.Run(ctx) }()
	for range 1234 {
		if err := w.Add(receipt("tenant-a", "alice")); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for w.Stored() < 1234 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := count(t, pool); n != 1234 {
		t.Fatalf("%d of 1234 stored", n)
	}
}

// TestRetriedBatchAfterLostAnswerStoresEachOnce: a batch stored once (its
// COPY committed) and sent again, as a retry after a lost answer would, is
// not an error and leaves every receipt stored once, with the new ones of
// the batch stored too; a stored row reads back field for field.
func TestRetriedBatchAfterLostAnswerStoresEachOnce(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	w := New(pool, Options{Interval: time.Hour})
	first := []*admissionv1.Receipt{receipt("tenant-a", "alice"), receipt("tenant-a", "alice")}
	if err := w.insert(ctx, first); err != nil {
		t.Fatal(err)
	}
	retry := append(first, receipt("tenant-a", "bob"))
	if err := w.insert(ctx, retry); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if n := count(t, pool); n != 3 {
		t.Fatalf("%d rows, want 3", n)
	}
	got, err := w.load(ctx, first[0].GetReceiptId())
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, first[0]) {
		t.Fatalf("stored %v, want %v", got, first[0])
	}
}

// TestStoredReceiptsAreAnsweredFromMemory: after the flush the writer keeps
// the RecentSize newest ALLOW receipts, so their lookups need no Postgres
// (the pool is closed to prove it), still bound to the principal; an older
// one, and a DENY, are read from Postgres (which fails here).
func TestStoredReceiptsAreAnsweredFromMemory(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	w := New(pool, Options{Interval: time.Hour, BatchSize: 2, RecentSize: 2, MissWait: -1})
	deny := receipt("tenant-a", "alice")
	deny.Decision, deny.Reason = admissionv1.Decision_DECISION_DENY, catalogv1.DecisionReason_DECISION_REASON_FORBIDDEN
	rs := []*admissionv1.Receipt{receipt("tenant-a", "alice"), deny, receipt("tenant-a", "alice"), receipt("tenant-a", "alice")}
	for _, r := range rs {
		if err := w.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if count(t, pool) != len(rs) {
		t.Fatalf("%d stored, want %d", count(t, pool), len(rs))
	}
	pool.Close()
	for _, r := range rs[2:] {
		got, err := w.Lookup(ctx, r.ReceiptId, "tenant-a", "alice")
		if err != nil || !proto.Equal(got, r) {
			t.Fatalf("recent receipt: %v %v", got, err)
		}
		if _, err := w.Lookup(ctx, r.ReceiptId, "tenant-a", "bob"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("recent receipt looked up by bob: %v", err)
		}
	}
	for _, r := range rs[:2] {
		if _, err := w.Lookup(ctx, r.ReceiptId, "tenant-a", "alice"); err == nil || errors.Is(err, ErrNotFound) {
			t.Fatalf("receipt %v was answered without Postgres (evicted or DENY should be read there): %v", r.GetDecision(), err)
		}
	}
	// Past the lookup window a recent receipt is not answered either.
	w.o.Now = func() time.Time { return time.Now().Add(w.o.LookupWindow + time.Second) }
	if _, err := w.Lookup(ctx, rs[3].ReceiptId, "tenant-a", "alice"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("old recent receipt: %v", err)
	}
}

// TestLookupWaitsForAnotherReplicasBatch: writer a decided a receipt and
// stores it 200 ms later; writer b (another replica, same database) looked
// it up at once and finds it, because a miss re-reads Postgres for
// MissWait. With no miss wait the same lookup is ErrNotFound, the bug this
// guards against; an id nobody decided is ErrNotFound after the wait.
func TestLookupWaitsForAnotherReplicasBatch(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	a := New(pool, Options{Interval: time.Hour})
	b := New(pool, Options{Interval: 20 * time.Millisecond, MissWait: 2 * time.Second})
	impatient := New(pool, Options{Interval: 20 * time.Millisecond, MissWait: -1})
	r := receipt("tenant-a", "alice")
	if err := a.Add(r); err != nil {
		t.Fatal(err)
	}
	if _, err := impatient.Lookup(ctx, r.ReceiptId, "tenant-a", "alice"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("without a miss wait, a receipt not stored yet: %v", err)
	}
	flushed := make(chan error, 1)
	go func() {
		time.Sleep(200 * time.Millisecond)
		flushed <- a.Flush(ctx)
	}()
	got, err := b.Lookup(ctx, r.ReceiptId, "tenant-a", "alice")
	if err != nil || !proto.Equal(got, r) {
		t.Fatalf("receipt stored by another replica 200 ms later: %v %v", got, err)
	}
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := b.Lookup(ctx, uuid.NewString(), "tenant-a", "alice"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Fatalf("unknown id answered after %s, before the miss wait", took)
	}
	if got := [...]int64{b.Lookups(FromMemory), b.Lookups(FromPostgres), b.Lookups(AfterWait), b.Lookups(NotFound)}; got != [...]int64{0, 0, 1, 1} {
		t.Fatalf("b's lookups (memory, postgres, after wait, not found) = %v, want [0 0 1 1]", got)
	}
	// Cited again, b answers from memory; a, which stored it, too.
	if _, err := b.Lookup(ctx, r.ReceiptId, "tenant-a", "alice"); err != nil || b.Lookups(FromMemory) != 1 {
		t.Fatalf("second lookup on b: %v, %d from memory", err, b.Lookups(FromMemory))
	}
	if _, err := a.Lookup(ctx, r.ReceiptId, "tenant-a", "alice"); err != nil || a.Lookups(FromMemory) != 1 || a.Lookups(FromPostgres) != 0 {
		t.Fatalf("lookup on a: %v, %d from memory, %d from Postgres", err, a.Lookups(FromMemory), a.Lookups(FromPostgres))
	}
	// A canceled lookup stops waiting.
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := b.Lookup(cctx, uuid.NewString(), "tenant-a", "alice"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("canceled lookup: %v", err)
	}
}

// A confirmed receipt keeps who confirmed, when and the shown digest
// through both ways a batch is stored (the binary COPY and the INSERT of a
// retried batch) and back; an unconfirmed one keeps them empty (NULL time).
func TestConfirmerIsStoredAndLoaded(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	w := New(pool, Options{Interval: time.Hour})
	confirmed := func() *admissionv1.Receipt {
		r := receipt("tenant-a", "alice")
		r.Mode, r.Confirmer, r.ConfirmedAt = admissionv1.Mode_MODE_USER_CONFIRMED, "gateway", r.DecidedAt
		r.ShownDigest = "sha256:" + fmt.Sprintf("%064x", 7)
		return r
	}
	byCopy, plain := confirmed(), receipt("tenant-a", "alice")
	if err := w.insert(ctx, []*admissionv1.Receipt{byCopy, plain}); err != nil {
		t.Fatal(err)
	}
	byInsert := confirmed()
	if err := w.insertSkippingStored(ctx, []*admissionv1.Receipt{byCopy, byInsert}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []*admissionv1.Receipt{byCopy, plain, byInsert} {
		got, err := w.load(ctx, want.GetReceiptId())
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("stored %v, want %v", got, want)
		}
	}
}

// An ALLOW a grant's condition admitted keeps the grant's name
// (Receipt.admitting_grant, issue 25) through both ways a batch is stored
// (the binary COPY and the INSERT of a retried batch) and back from
// Postgres; a receipt without one keeps it empty.
func TestAdmittingGrantIsStoredAndLoaded(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	w := New(pool, Options{Interval: time.Hour})
	admitted := func() *admissionv1.Receipt {
		r := receipt("tenant-a", "sam")
		r.AdmittingGrant = "group:support"
		return r
	}
	byCopy, plain := admitted(), receipt("tenant-a", "alice")
	if err := w.insert(ctx, []*admissionv1.Receipt{byCopy, plain}); err != nil {
		t.Fatal(err)
	}
	byInsert := admitted()
	byInsert.AdmittingGrant = "subject:sam"
	if err := w.insertSkippingStored(ctx, []*admissionv1.Receipt{byCopy, byInsert}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []*admissionv1.Receipt{byCopy, plain, byInsert} {
		got, err := w.load(ctx, want.GetReceiptId())
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("stored %v, want %v", got, want)
		}
	}
}

package scan

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/services/discovery/internal/store"
)

// tryLock is a scan's start reduced to its lock: pg_try_advisory_lock on
// the session it is given.
func tryLock(key int64) func(context.Context, store.Session) (bool, error) {
	return func(ctx context.Context, s store.Session) (bool, error) {
		var ok bool
		b := &pgx.Batch{}
		b.Queue("SELECT pg_try_advisory_lock($1)", key).QueryRow(func(r pgx.Row) error { return r.Scan(&ok) })
		return ok, s.SendBatch(ctx, b).Close()
	}
}

// otherProcess is another process's session: it takes and gives back a
// key to say whether it is free.
type otherProcess struct {
	t    *testing.T
	conn *pgx.Conn
}

func (o otherProcess) free(key int64) bool {
	o.t.Helper()
	ctx := context.Background()
	var ok bool
	if err := o.conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&ok); err != nil {
		o.t.Fatal(err)
	}
	if ok {
		if _, err := o.conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", key); err != nil {
			o.t.Fatal(err)
		}
	}
	return ok
}

func newPairLocksFixture(t *testing.T) (*pairLocks, otherProcess) {
	t.Helper()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	p := newPairLocks(pool)
	t.Cleanup(p.close)
	return p, otherProcess{t: t, conn: conn}
}

func noCancel(error) {}

// Postgres grants a session a lock it holds already, so one session for
// every scan of a process must refuse a second scan of a held pair itself.
func TestPairLocksRefuseAPairHeldInTheProcess(t *testing.T) {
	ctx := context.Background()
	p, other := newPairLocksFixture(t)
	h, err := p.start(ctx, 1, noCancel, tryLock(1))
	if err != nil || h == nil {
		t.Fatalf("first scan of the pair: %v, %v", h, err)
	}
	if again, err := p.start(ctx, 1, noCancel, tryLock(1)); err != nil || again != nil {
		t.Fatalf("a second scan of a pair this process holds was let in: %v, %v", again, err)
	}
	if other.free(1) {
		t.Fatal("another process could take a pair a scan holds")
	}
	h2, err := p.start(ctx, 2, noCancel, tryLock(2))
	if err != nil || h2 == nil {
		t.Fatalf("another pair on the same session: %v, %v", h2, err)
	}
	if p.holding() != 2 {
		t.Fatalf("holding %d, want 2", p.holding())
	}
	p.release(ctx, h)
	if !other.free(1) {
		t.Fatal("a released pair stayed locked")
	}
	if other.free(2) {
		t.Fatal("releasing one pair gave back another")
	}
	if h, err := p.start(ctx, 1, noCancel, tryLock(1)); err != nil || h == nil {
		t.Fatalf("the released pair could not be taken again: %v, %v", h, err)
	}
}

// A pair another process holds is refused, and nothing is held for it.
func TestPairLocksRefuseAPairHeldElsewhere(t *testing.T) {
	ctx := context.Background()
	p, other := newPairLocksFixture(t)
	if _, err := other.conn.Exec(ctx, "SELECT pg_advisory_lock(7)"); err != nil {
		t.Fatal(err)
	}
	if h, err := p.start(ctx, 7, noCancel, tryLock(7)); err != nil || h != nil {
		t.Fatalf("a pair held by another process was let in: %v, %v", h, err)
	}
	if p.holding() != 0 {
		t.Fatalf("holding %d after a refusal", p.holding())
	}
	if _, err := other.conn.Exec(ctx, "SELECT pg_advisory_unlock(7)"); err != nil {
		t.Fatal(err)
	}
	if h, err := p.start(ctx, 7, noCancel, tryLock(7)); err != nil || h == nil {
		t.Fatalf("the pair once free: %v, %v", h, err)
	}
}

// A scan's start that fails after its statement took the lock gives the
// lock back and leaves the session, and the other scans' locks, alone.
func TestPairLocksFailedStartGivesItsLockBack(t *testing.T) {
	ctx := context.Background()
	p, other := newPairLocksFixture(t)
	ctx1, cancel1 := context.WithCancelCause(ctx)
	defer cancel1(nil)
	if h, err := p.start(ctx, 1, cancel1, tryLock(1)); err != nil || h == nil {
		t.Fatal(h, err)
	}
	failing := func(ctx context.Context, s store.Session) (bool, error) {
		b := &pgx.Batch{}
		// The lock, then a division by zero at run time (a constant one
		// would fail as the statement is planned, before the lock).
		b.Queue("WITH l AS MATERIALIZED (SELECT pg_try_advisory_lock(3) AS ok) SELECT 1 / (count(*) - 1) FROM l WHERE ok")
		return false, s.SendBatch(ctx, b).Close()
	}
	if h, err := p.start(ctx, 3, noCancel, failing); err == nil || h != nil {
		t.Fatalf("a failed start: %v, %v", h, err)
	}
	if !other.free(3) {
		t.Fatal("the failed start kept the lock its statement took")
	}
	if other.free(1) || ctx1.Err() != nil || p.holding() != 1 {
		t.Fatalf("a failed start cost another scan its lock (free %v, cancelled %v, holding %d)", other.free(1), ctx1.Err(), p.holding())
	}
}

// A session that dies takes every lock on it: every scan that held one is
// cancelled with errPairLockLost, the next scan opens a new session, and a
// hold from the dead session released later leaves a newer hold of its
// pair alone.
func TestPairLocksLostSessionCancelsItsScans(t *testing.T) {
	ctx := context.Background()
	p, other := newPairLocksFixture(t)
	ctx1, cancel1 := context.WithCancelCause(ctx)
	defer cancel1(nil)
	ctx2, cancel2 := context.WithCancelCause(ctx)
	defer cancel2(nil)
	old1, err := p.start(ctx, 1, cancel1, tryLock(1))
	if err != nil || old1 == nil {
		t.Fatal(old1, err)
	}
	if h, err := p.start(ctx, 2, cancel2, tryLock(2)); err != nil || h == nil {
		t.Fatal(h, err)
	}
	pid := p.conn.Conn().PgConn().PID()
	if _, err := other.conn.Exec(ctx, "SELECT pg_terminate_backend($1, 5000)", pid); err != nil {
		t.Fatal(err)
	}
	if h, err := p.start(ctx, 3, noCancel, tryLock(3)); err == nil || h != nil {
		t.Fatalf("a start on a dead session: %v, %v", h, err)
	}
	for i, c := range []context.Context{ctx1, ctx2} {
		if !errors.Is(context.Cause(c), errPairLockLost) {
			t.Errorf("scan %d holding a lock of the dead session: cause %v, want errPairLockLost", i+1, context.Cause(c))
		}
	}
	for _, k := range []int64{1, 2, 3} {
		if !other.free(k) {
			t.Errorf("pair %d still locked after its session died", k)
		}
	}
	if p.holding() != 0 {
		t.Fatalf("holding %d after the session died", p.holding())
	}
	// A new session for the next scan; the old hold of pair 1 must not
	// give back the new one's lock.
	new1, err := p.start(ctx, 1, noCancel, tryLock(1))
	if err != nil || new1 == nil {
		t.Fatalf("a scan after the session died: %v, %v", new1, err)
	}
	if p.conn.Conn().PgConn().PID() == pid {
		t.Fatal("the dead session was used again")
	}
	p.release(ctx, old1)
	if other.free(1) {
		t.Fatal("releasing a hold of the dead session gave back the new session's lock")
	}
	p.release(ctx, new1)
	if !other.free(1) {
		t.Fatal("the new hold's release did not give its lock back")
	}
}

// A scan whose context ends while its start runs on the session must not
// take the session (and every other scan's lock) down with it.
func TestPairLocksSurviveACancelledScan(t *testing.T) {
	ctx := context.Background()
	p, other := newPairLocksFixture(t)
	h, err := p.start(ctx, 1, noCancel, tryLock(1))
	if err != nil || h == nil {
		t.Fatal(h, err)
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	slow := func(ctx context.Context, s store.Session) (bool, error) {
		var ok bool
		b := &pgx.Batch{}
		b.Queue("SELECT pg_try_advisory_lock(2) FROM pg_sleep(0.05)").QueryRow(func(r pgx.Row) error { return r.Scan(&ok) })
		return ok, s.SendBatch(ctx, b).Close()
	}
	h2, err := p.start(gone, 2, noCancel, slow)
	if err != nil || h2 == nil {
		t.Fatalf("a start on a cancelled context: %v, %v", h2, err)
	}
	if other.free(1) || other.free(2) {
		t.Fatal("a cancelled scan's start cost the session its locks")
	}
	p.release(gone, h2)
	if !other.free(2) {
		t.Fatal("a release on a cancelled context did not give the lock back")
	}
}

// queueRelease is the first half of [pairLocks.release]: the hold is gone
// and its unlock queued, as when the release waits for the session while
// another statement runs on it.
func queueRelease(p *pairLocks, h *pairLock) {
	p.hmu.Lock()
	defer p.hmu.Unlock()
	delete(p.held, h.key)
	p.unlocks = append(p.unlocks, h.key)
}

// A scan's start carries the unlocks queued while it waited for the
// session, ahead of its own lock: the released pairs are free once it
// ran, and a pair released and started again stays held (its unlock ran
// before its new lock).
func TestPairLocksStartCarriesQueuedUnlocks(t *testing.T) {
	ctx := context.Background()
	p, other := newPairLocksFixture(t)
	hold := func(key int64) *pairLock {
		t.Helper()
		h, err := p.start(ctx, key, noCancel, tryLock(key))
		if err != nil || h == nil {
			t.Fatalf("start %d: %v, %v", key, h, err)
		}
		return h
	}
	h1, h2 := hold(1), hold(2)
	queueRelease(p, h1)
	queueRelease(p, h2)
	if other.free(1) || other.free(2) {
		t.Fatal("a queued unlock ran before a statement carried it")
	}
	h3 := hold(3)
	if !other.free(1) || !other.free(2) || len(p.unlocks) != 0 {
		t.Fatalf("the start did not carry the queued unlocks (free %v %v, queued %v)", other.free(1), other.free(2), p.unlocks)
	}
	queueRelease(p, h3)
	hold(3)
	if other.free(3) {
		t.Fatal("a pair started again right after its release was given back by the queued unlock")
	}
	// The release of a hold whose unlock a start already carried sends
	// nothing more, and leaves the other holds alone.
	h4 := hold(4)
	p.release(ctx, h4)
	if !other.free(4) || other.free(3) || p.holding() != 1 {
		t.Fatalf("free 4 %v, free 3 %v, holding %d", other.free(4), other.free(3), p.holding())
	}
}

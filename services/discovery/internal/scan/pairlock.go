package scan

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolcrib/toolcrib/services/discovery/internal/store"
)

// pairLocks holds the pair locks of this process's scans (see [pairKey]),
// all on one Postgres session of the process's own: a scan holds its
// pair's session advisory lock for its whole duration, and a killed
// process's locks die with that session, as they did when each scan held
// a connection of its own for its lock (issue 27: 32 scans in flight kept
// 32 more backends busy holding one lock each, every one of them born,
// warmed and planning each statement anew; the 800-server case paid that
// in Postgres CPU, and each discovery process added its workers' count of
// backends).
//
// One session takes a lock again without waiting (session advisory locks
// are reentrant), so the process keeps the keys it holds: a scan whose key
// is held here is refused as one held elsewhere is. The session's
// statements run one at a time (mu): a scan's start (the lock, its run
// and its view, one round trip, see [store.Store.StartScan]) and the
// unlocks of the scans that ended. A scan that ends queues its unlock and
// waits for the session: the next statement on it, a scan's start or the
// first waiting end's, carries every unlock queued by then in its round
// trip (issue 27: 800 scans cost 800 unlock round trips on the one
// session, each waited for by the starts queued behind it). A key is
// unlocked before it is locked again: a start sends the queued unlocks
// ahead of its lock. A scan's start that fails gives back the lock it may have taken;
// when the session itself fails (it died, or the unlock failed), it is
// closed and every lock on it is gone: each scan holding one is cancelled
// with [errPairLockLost] (it ends INCOMPLETE and River retries it), and the
// next scan opens a new session. A session that dies is found by the next
// statement on it, the next scan's start or end; until then its scans go
// on without their locks, as a scan whose own lock connection died did
// before (another process may then scan the same pair: the pointer's
// compare-and-swap still lets one of the two commit).
type pairLocks struct {
	pool *pgxpool.Pool

	mu   sync.Mutex
	conn *pgxpool.Conn // nil until a scan starts, and after a failure

	// hmu guards held and unlocks; taken alone, or inside mu.
	hmu  sync.Mutex
	held map[int64]*pairLock
	// unlocks are the keys of the holds released whose unlock no
	// statement took yet.
	unlocks []int64
}

// pairLock is one scan's hold on its pair's lock.
type pairLock struct {
	key    int64
	cancel context.CancelCauseFunc
}

// sessionTimeout bounds one statement on the session.
const sessionTimeout = 30 * time.Second

// errPairLockLost cancels the scans whose locks died with their session.
var errPairLockLost = errors.New("the Postgres session holding the scan's pair lock was lost")

func newPairLocks(pool *pgxpool.Pool) *pairLocks {
	return &pairLocks{pool: pool, held: map[int64]*pairLock{}}
}

// start takes key's lock on the session and runs start (the lock, gated
// on that same statement, and the run's start; see [store.Store.StartScan])
// on it. It returns the hold (nil when the key is held, here or by another
// process) to give to [pairLocks.release]; cancel is called with
// [errPairLockLost] when the session dies while the lock is held.
func (p *pairLocks) start(ctx context.Context, key int64, cancel context.CancelCauseFunc,
	start func(context.Context, store.Session) (locked bool, err error)) (*pairLock, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hmu.Lock()
	held := p.held[key] != nil
	p.hmu.Unlock()
	if held {
		return nil, nil
	}
	if p.conn == nil {
		c, err := p.pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		p.conn = c
	}
	// The statement runs on a context no one scan can cancel: a query
	// interrupted by its context leaves the session unusable, and every
	// lock on it would go.
	sctx, cancelStmt := context.WithTimeout(context.WithoutCancel(ctx), sessionTimeout)
	defer cancelStmt()
	session := &carrying{conn: p.conn, keys: p.takeUnlocks()}
	locked, err := start(sctx, session)
	switch {
	case len(session.keys) > 0 && !session.sent:
		p.unlockOrDropLocked(ctx, session.keys...)
	case len(session.keys) > 0 && !session.ran:
		// Whether the queued unlocks ran is unknown: only closing the
		// session gives their locks back for sure.
		p.dropLocked()
		if err == nil {
			err = errPairLockLost
		}
		return nil, err
	}
	if err != nil {
		// The lock may be held (a session lock outlives the rollback of
		// the statement that took it): give it back, or when the session
		// cannot, close it.
		p.unlockOrDropLocked(ctx, key)
		return nil, err
	}
	if !locked {
		return nil, nil
	}
	h := &pairLock{key: key, cancel: cancel}
	p.hmu.Lock()
	p.held[key] = h
	p.hmu.Unlock()
	return h, nil
}

// release gives a hold's lock back, and returns once it is given back: it
// queues the unlock, then waits for the session, whose next statement
// carries it (a start's, or this release's); a hold whose session died
// meanwhile has nothing to give back (and a newer hold of the same key is
// not touched).
func (p *pairLocks) release(ctx context.Context, h *pairLock) {
	p.hmu.Lock()
	if p.held[h.key] != h {
		p.hmu.Unlock()
		return
	}
	delete(p.held, h.key)
	p.unlocks = append(p.unlocks, h.key)
	p.hmu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	// A statement that ran while this waited may have carried the unlock.
	p.unlockOrDropLocked(ctx)
}

// takeUnlocks returns the queued unlocks, which the caller's statement
// carries.
func (p *pairLocks) takeUnlocks() []int64 {
	p.hmu.Lock()
	defer p.hmu.Unlock()
	keys := p.unlocks
	p.unlocks = nil
	return keys
}

// unlockSQL gives back the locks of the keys $1 in one statement. No lock
// of this process is held on such a key then (a key is in held at most
// once, and a start sends the queued unlocks ahead of its lock); unlocking
// a key the session does not hold answers false, which is fine.
const unlockSQL = "SELECT pg_advisory_unlock(k) FROM unnest($1::bigint[]) AS k"

// unlockOrDropLocked gives back the locks of the queued unlocks and of
// keys on the session; when that fails, it closes the session.
func (p *pairLocks) unlockOrDropLocked(ctx context.Context, keys ...int64) {
	keys = append(keys, p.takeUnlocks()...)
	if len(keys) == 0 {
		return
	}
	if p.conn == nil || p.conn.Conn().IsClosed() {
		p.dropLocked()
		return
	}
	sctx, cancelStmt := context.WithTimeout(context.WithoutCancel(ctx), sessionTimeout)
	defer cancelStmt()
	if _, err := p.conn.Exec(sctx, unlockSQL, keys); err != nil {
		p.dropLocked()
	}
}

// carrying is the session as a scan's start uses it: its (first) batch
// goes with the queued unlocks ahead of it, in its round trip; sent says
// they were sent, ran that they ran.
type carrying struct {
	conn      *pgxpool.Conn
	keys      []int64
	sent, ran bool
}

func (c *carrying) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if len(c.keys) == 0 || c.sent {
		return c.conn.SendBatch(ctx, b)
	}
	c.sent = true
	all := &pgx.Batch{}
	all.Queue(unlockSQL, c.keys).Exec(func(pgconn.CommandTag) error { c.ran = true; return nil })
	all.QueuedQueries = append(all.QueuedQueries, b.QueuedQueries...)
	return c.conn.SendBatch(ctx, all)
}

// dropLocked closes the session; every lock on it is gone, so every scan
// holding one is cancelled (and no queued unlock is left to send).
func (p *pairLocks) dropLocked() {
	p.hmu.Lock()
	p.unlocks = nil
	for k, h := range p.held {
		h.cancel(errPairLockLost)
		delete(p.held, k)
	}
	p.hmu.Unlock()
	if p.conn != nil {
		_ = p.conn.Conn().Close(context.Background())
		p.conn.Release()
		p.conn = nil
	}
}

// close ends the session (once the scans ended).
func (p *pairLocks) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropLocked()
}

// holding reports how many locks the session holds (for tests).
func (p *pairLocks) holding() int {
	p.hmu.Lock()
	defer p.hmu.Unlock()
	return len(p.held)
}

package scan

import (
	"context"
	"errors"
	"sync"
	"time"

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
// and its view, one round trip, see [store.Store.StartScan]) and a scan's
// unlock. A scan's start that fails gives back the lock it may have taken;
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
	held map[int64]*pairLock
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
	if p.held[key] != nil {
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
	locked, err := start(sctx, p.conn)
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
	p.held[key] = h
	return h, nil
}

// release gives a hold's lock back; a hold whose session died meanwhile has
// nothing to give back (and a newer hold of the same key is not touched).
func (p *pairLocks) release(ctx context.Context, h *pairLock) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held[h.key] != h {
		return
	}
	delete(p.held, h.key)
	p.unlockOrDropLocked(ctx, h.key)
}

// unlockOrDropLocked gives key's lock back on the session (no lock of this
// process is held on key then: a key is in held at most once); when that
// fails, it closes the session. Unlocking a key the session does not hold
// answers false, which is fine.
func (p *pairLocks) unlockOrDropLocked(ctx context.Context, key int64) {
	if p.conn == nil || p.conn.Conn().IsClosed() {
		p.dropLocked()
		return
	}
	sctx, cancelStmt := context.WithTimeout(context.WithoutCancel(ctx), sessionTimeout)
	defer cancelStmt()
	if _, err := p.conn.Exec(sctx, "SELECT pg_advisory_unlock($1)", key); err != nil {
		p.dropLocked()
	}
}

// dropLocked closes the session; every lock on it is gone, so every scan
// holding one is cancelled.
func (p *pairLocks) dropLocked() {
	for k, h := range p.held {
		h.cancel(errPairLockLost)
		delete(p.held, k)
	}
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
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.held)
}

package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/platform/postgres"
)

// Group commit. Every commit appends to the change log, and from its append
// to the end of its transaction (the WAL flush included) every other commit
// waits on the log's counter row: one row caps the whole fleet at one flush
// per commit (BenchmarkCommitsThroughCounterRow in package changelog:
// a few hundred commits per second, against thousands when each commit
// writes only rows of its own). So scan commits that are waiting at the same
// time share one transaction: each does its work, then the changes are
// appended together, in one round trip, and the transaction commits once.
// When one commit's work fails (a lost CAS, a failed statement), the
// transaction rolls back and the group runs again with a savepoint per
// commit, so that the failure rolls back only that commit (savepoints for
// every group cost a round trip and a subtransaction per commit, and
// commits almost never fail). Revisions stay gapless and in
// commit order (they are taken in one transaction, consecutively), every
// commit is still atomic (its writes and its append commit together or
// not at all), and the counter row is held for one append round trip and one
// flush per group instead of per commit.
//
// Every group transaction takes the pointer rows of its commits in one
// order (by server and audience class, rivals for one pair in the order
// they came): two groups (of two processes) that hold rivals for
// the same pairs then wait on each other in one direction only and never
// deadlock (they did when each ran its commits in arrival order: group A
// inserted pair 1 then waited on pair 2 that group B had inserted before
// waiting on pair 1). A commit that still ends in a deadlock or a
// serialization failure (a writer outside the groups) is run again in a
// later group, at most [maxTries] times in all.

const (
	// maxGroup is the most commits one transaction carries.
	maxGroup = 32
	// maxGroups is how many group transactions one process runs at once
	// (each holds a pooled connection). Every group waits on the change
	// log's counter row from its append to its commit, so more groups in
	// flight do not commit more: they only make each group smaller, and
	// each group pays its own statements (issue 27: with 4, the 800-server
	// crawl committed 800 scans in 629 groups and its Postgres backends used
	// 4.28/4.04/3.87 s of CPU; with 2, 3.71/3.54/3.01 s, interleaved, stop
	// 36). With one, the next group forms while the group in flight
	// appends and flushes, and no group's append waits on another's
	// (2026-12-04, 800 servers, five interleaved runs each: 247 groups
	// against 443, the appends' execution 69 ms against 530; the crawl 2.46
	// s against 2.62, its Postgres backends 1.62 s of CPU against 1.88; the
	// 8,000 servers with 1/2/4 processes 24.4/23.5/29.3 s against
	// 25.4/27.4/30.9).
	maxGroups = 1
	// groupTimeout bounds one group transaction; it runs on a context of
	// its own so that one scan's cancellation never aborts the others.
	groupTimeout = time.Minute
	// maxTries is how many times one commit is run when Postgres aborts
	// it for a deadlock or a serialization failure.
	maxTries = 3
)

// pendingChange is the change one commit appends once the commits of its
// group did their work; rev receives its revision.
type pendingChange struct {
	ptr    *discoveryv1.ActivePointer
	rcpt   *catalogv1.CatalogReceipt
	reason string
	rev    int64
	// job is the queue job completed with the change (0: none).
	job int64
}

// commitWork does one commit's work in tx and returns the change to append.
// An error rolls back that commit alone.
type commitWork func(ctx context.Context, tx pgx.Tx) (*pendingChange, error)

type groupItem struct {
	ctx context.Context
	// key orders the commits of a group: the pair whose pointer the
	// commit moves.
	key    string
	tries  int
	work   commitWork
	change *pendingChange
	err    error
	done   chan struct{}
}

// grouper forms the groups of one store.
type grouper struct {
	s       *Store
	mu      sync.Mutex
	queue   []*groupItem
	running int
}

// commit runs work in the next group transaction and returns its change
// with its revision once that transaction committed. A context that ends
// before the group starts the work gives its error; once started, the
// work's outcome is awaited (a commit never ends unknown to its caller).
func (g *grouper) commit(ctx context.Context, serverID, audienceClass string, work commitWork) (*pendingChange, error) {
	it := &groupItem{ctx: ctx, key: serverID + "\x00" + audienceClass, work: work, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, it)
	start := g.running < maxGroups
	if start {
		g.running++
	}
	g.mu.Unlock()
	if start {
		go g.loop()
	}
	<-it.done
	return it.change, it.err
}

// loop runs groups while commits wait.
func (g *grouper) loop() {
	for {
		g.mu.Lock()
		if len(g.queue) == 0 {
			g.running--
			g.mu.Unlock()
			return
		}
		n := min(len(g.queue), maxGroup)
		items := make([]*groupItem, n)
		copy(items, g.queue)
		g.queue = append(g.queue[:0], g.queue[n:]...)
		g.mu.Unlock()
		if again := g.s.runGroup(items); len(again) > 0 {
			g.mu.Lock()
			g.queue = append(again, g.queue...)
			g.mu.Unlock()
		}
	}
}

// run is the item's work; a panic in it becomes its error (the queue
// recovered panics of a scan's commit when it ran in the scan's goroutine;
// here it must not take the other commits of the group down).
func (it *groupItem) run(ctx context.Context, tx pgx.Tx) (c *pendingChange, err error) {
	defer func() {
		if r := recover(); r != nil {
			c, err = nil, fmt.Errorf("%w: %v", errCommitPanicked, r)
		}
	}()
	return it.work(ctx, tx)
}

// errCommitPanicked wraps a panic of a commit's work.
var errCommitPanicked = errors.New("store: the commit panicked")

// runGroup is one group transaction, its commits in key order. It returns
// the commits Postgres aborted for a deadlock or a serialization failure
// that may run again; every other commit is done.
func (s *Store) runGroup(items []*groupItem) (again []*groupItem) {
	sortGroup(items)
	defer func() {
		for _, it := range items {
			if it.tries++; postgres.IsSerializationFailure(it.err) && it.tries < maxTries && it.ctx.Err() == nil {
				s.log.Logger().Warn("discovery store: a commit runs again", "pair", strings.ReplaceAll(it.key, "\x00", "/"), "try", it.tries+1, "err", it.err)
				it.change, it.err = nil, nil
				again = append(again, it)
				continue
			}
			close(it.done)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	var ok []*groupItem
	// First without savepoints: the commits' work almost never fails (a
	// lost CAS writes nothing and is not a failure of the transaction),
	// and a savepoint per commit costs a round trip and a subtransaction
	// each. When a commit's work fails, the transaction rolls back whole
	// and the group runs again with a savepoint per commit.
	for savepoints := false; ; savepoints = true {
		workFailed := false
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			ok = ok[:0]
			for _, it := range items {
				if err := it.ctx.Err(); err != nil {
					it.err = err
					continue
				}
				// The work sees its caller's values (the queue job's
				// client) but the group's deadline, never its caller's
				// cancellation.
				wctx, wcancel := context.WithDeadline(context.WithoutCancel(it.ctx), deadline)
				defer wcancel()
				if !savepoints || len(items) == 1 {
					// The transaction is the commit's (alone) or the
					// group's: a failure fails it whole.
					c, err := it.run(wctx, tx)
					if err != nil {
						it.err, workFailed = err, true
						return err
					}
					it.change, ok = c, append(ok, it)
					continue
				}
				// A savepoint of the commit's own; it is never released
				// (the transaction's commit keeps it, and a release would
				// cost a round trip per commit), only rolled back to when
				// the work fails. A savepoint name may repeat: ROLLBACK TO
				// names the latest.
				if _, err := tx.Exec(wctx, "SAVEPOINT group_commit"); err != nil {
					it.err = err
					return err
				}
				c, err := it.run(wctx, tx)
				if err != nil {
					it.err = err
					if _, rerr := tx.Exec(wctx, "ROLLBACK TO SAVEPOINT group_commit"); rerr != nil {
						return rerr
					}
					continue
				}
				it.change, ok = c, append(ok, it)
			}
			changes := make([]*pendingChange, 0, len(ok))
			for _, it := range ok {
				if it.change != nil {
					changes = append(changes, it.change)
				}
			}
			return s.appendChanges(ctx, tx, changes)
		})
		if err != nil && workFailed && !savepoints && len(items) > 1 && ctx.Err() == nil {
			for _, it := range items {
				it.change, it.err = nil, nil
			}
			continue
		}
		if err != nil {
			for _, it := range items {
				if it.err == nil {
					it.change, it.err = nil, err
				}
			}
		}
		break
	}
	return nil // the deferred loop names the commits to run again
}

// sortGroup puts a group's commits in key order, rivals for one pair in
// the order they came.
func sortGroup(items []*groupItem) {
	slices.SortStableFunc(items, func(a, b *groupItem) int { return strings.Compare(a.key, b.key) })
}

// appendChanges appends the changes in order, in one round trip (see
// [Store.queueChanges]: the queue jobs' completion, then the append with
// the pointers' and receipts' revisions in one statement), as the last
// statements of tx: from the append to the commit every other writer of
// the log waits on its counter row.
func (s *Store) appendChanges(ctx context.Context, tx pgx.Tx, changes []*pendingChange) error {
	if len(changes) == 0 {
		return nil
	}
	var b pgx.Batch
	if err := s.queueChanges(&b, changes); err != nil {
		return err
	}
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return fmt.Errorf("store: append the pointer changes: %w", err)
	}
	return nil
}

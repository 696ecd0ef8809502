package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolcrib/toolcrib/services/discovery/crawl"
	"github.com/toolcrib/toolcrib/services/discovery/internal/store"
)

var errRefusedInTx = errors.New("the caller's part refused")

// Commits waiting together share one transaction (group commit); inside it
// each is still on its own: a lost CAS and a failing caller's part (the
// queue job) roll back that commit only, every winner gets the revision the
// log gave its change, and the log stays gapless with one change per
// winner.
func TestGroupCommitKeepsEachCommitOnItsOwn(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const pointers = 48
	type attempt struct {
		server string
		run    string
		fail   bool // the caller's part fails
		rev    int64
		err    error
	}
	var attempts []*attempt
	for i := range pointers {
		server := fmt.Sprintf("srv%02d", i)
		attempts = append(attempts, &attempt{server: server, run: f.run(t, server, "a.readers"), fail: i%8 == 7})
		if i%3 == 0 { // a rival for the same first generation
			attempts = append(attempts, &attempt{server: server, run: f.run(t, server, "a.readers")})
		}
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, a := range attempts {
		wg.Go(func() {
			<-start
			c := store.Commit{RunID: a.run, Snapshot: snapshot(a.server, "a.readers", "r1", 3, time.Hour), State: eligible,
				Run: store.RunEnd{SourceRevision: "r1", ToolCount: 3, Pages: []crawl.Page{{Index: 0, ToolCount: 3, Digest: "sha256:x", ReceivedAt: time.Now()}}}}
			if a.fail {
				c.InTx = func(context.Context, pgx.Tx) error { return errRefusedInTx }
			}
			out, err := f.st.Commit(ctx, c)
			a.err = err
			if err == nil {
				a.rev = out.Pointer.Revision
			}
		})
	}
	close(start)
	wg.Wait()

	won := map[string]int64{}
	for _, a := range attempts {
		switch {
		case a.fail:
			// Refused by its part, or (with a rival that got there first)
			// by the CAS; never committed.
			if !errors.Is(a.err, errRefusedInTx) && !errors.Is(a.err, store.ErrCASConflict) {
				t.Fatalf("%s: a commit whose part failed ended %v", a.server, a.err)
			}
		case a.err == nil:
			if _, dup := won[a.server]; dup {
				t.Fatalf("%s: two commits of one generation won", a.server)
			}
			won[a.server] = a.rev
		case !errors.Is(a.err, store.ErrCASConflict):
			t.Fatalf("%s: %v", a.server, a.err)
		}
	}
	for i := range pointers {
		server := fmt.Sprintf("srv%02d", i)
		_, ok := won[server]
		// A failing attempt alone leaves its pointer uncommitted; with a
		// rival (i%3 == 0) the rival wins.
		if want := i%8 != 7 || i%3 == 0; ok != want {
			t.Fatalf("%s: committed=%v, want %v", server, ok, want)
		}
	}
	entries, err := f.log.Read(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(won) {
		t.Fatalf("the log has %d changes for %d winners", len(entries), len(won))
	}
	for i, e := range entries {
		if e.Revision != int64(i+1) {
			t.Fatalf("change %d has revision %d: a gap", i, e.Revision)
		}
		c, err := store.DecodeChange(e)
		if err != nil {
			t.Fatal(err)
		}
		if got := won[c.GetPointer().GetServerId()]; got != e.Revision {
			t.Fatalf("%s: the commit returned revision %d, the log has %d", c.GetPointer().GetServerId(), got, e.Revision)
		}
		p, err := f.st.ActivePointer(ctx, c.GetPointer().GetServerId(), "a.readers")
		if err != nil || p.Revision != e.Revision {
			t.Fatalf("%s: pointer %v %v, want revision %d", c.GetPointer().GetServerId(), p, err, e.Revision)
		}
		// The receipt of the change, stamped with its revision.
		var receipt string
		var rrev int64
		if err := f.pool.QueryRow(ctx, `SELECT receipt_id::text, revision FROM receipts WHERE server_id = $1`,
			c.GetPointer().GetServerId()).Scan(&receipt, &rrev); err != nil || receipt != c.GetReceipt().GetReceiptId() || rrev != e.Revision {
			t.Fatalf("%s: receipt %s at revision %d (%v), want %s at %d", c.GetPointer().GetServerId(), receipt, rrev, err,
				c.GetReceipt().GetReceiptId(), e.Revision)
		}
	}
	// The commits did share transactions: fewer writing transactions than
	// winners (the pointer rows' xmin names the transaction that wrote them).
	var txs int
	if err := f.pool.QueryRow(ctx, `SELECT count(DISTINCT xmin::text) FROM pointers`).Scan(&txs); err != nil {
		t.Fatal(err)
	}
	if txs >= len(won) {
		t.Fatalf("%d winners committed in %d transactions: no group formed", len(won), txs)
	}
	t.Logf("%d commits in %d transactions", len(won), txs)
}

// Commits that all succeed share their group's transaction without a
// savepoint each (a savepoint per commit cost a round trip and a
// subtransaction): every snapshot row was written by the very transaction
// that appended its change to the log (rows written under a savepoint
// carry the subtransaction's id), and the commits did form groups.
func TestGroupCommitWithoutFailuresTakesNoSavepoints(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const commits = 32
	runs := make([]string, commits)
	for i := range runs {
		runs[i] = f.run(t, fmt.Sprintf("srv%02d", i), "a.readers")
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, commits)
	for i := range commits {
		wg.Go(func() {
			<-start
			server := fmt.Sprintf("srv%02d", i)
			_, errs[i] = f.st.Commit(ctx, store.Commit{RunID: runs[i], Snapshot: snapshot(server, "a.readers", "r1", 3, time.Hour),
				State: eligible, Run: store.RunEnd{SourceRevision: "r1", ToolCount: 3}})
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("srv%02d: %v", i, err)
		}
	}
	var rows, underSavepoint, txs int
	if err := f.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE s.xmin::text <> c.xmin::text), count(DISTINCT c.xmin::text)
FROM snapshots s JOIN pointers p USING (server_id, audience_class, generation) JOIN changes c ON c.revision = p.revision`).
		Scan(&rows, &underSavepoint, &txs); err != nil {
		t.Fatal(err)
	}
	if rows != commits || underSavepoint != 0 || txs >= commits {
		t.Fatalf("%d snapshots, %d written apart from their change's transaction, %d transactions", rows, underSavepoint, txs)
	}
	t.Logf("%d commits in %d transactions", commits, txs)
}

// A commit whose caller's part panics fails alone: the others of its group
// commit, and the process does not go down with it.
func TestGroupCommitSurvivesAPanickingCommit(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const n = 16
	runs := make([]string, n)
	for i := range runs {
		runs[i] = f.run(t, fmt.Sprintf("srv%02d", i), "a.readers")
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			server := fmt.Sprintf("srv%02d", i)
			c := store.Commit{RunID: runs[i], Snapshot: snapshot(server, "a.readers", "r1", 3, time.Hour), State: eligible,
				Run: store.RunEnd{SourceRevision: "r1", ToolCount: 3, Pages: []crawl.Page{{Index: 0, ToolCount: 3, Digest: "sha256:x", ReceivedAt: time.Now()}}}}
			if i == 5 {
				c.InTx = func(context.Context, pgx.Tx) error { panic("the caller's part broke") }
			}
			_, errs[i] = f.st.Commit(ctx, c)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if (err != nil) != (i == 5) {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	if !strings.Contains(errs[5].Error(), "panicked") {
		t.Fatalf("the panicking commit ended %v", errs[5])
	}
	if _, err := f.st.ActivePointer(ctx, "srv05", "a.readers"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the panicking commit left a pointer: %v", err)
	}
	head, err := f.log.Head(ctx)
	if err != nil || head != n-1 {
		t.Fatalf("head %d %v, want %d", head, err, n-1)
	}
}

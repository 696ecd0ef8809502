package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"google.golang.org/protobuf/types/known/timestamppb"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/postgres"
)

func newInternalStore(t *testing.T) *Store {
	t.Helper()
	url := pgtest.NewDatabase(t, pgtest.Schema{Name: Schema, Sets: Sets()})
	pool, err := postgres.Open(context.Background(), url, Schema)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return New(pool, changelog.New(pool, "discovery_changes", slog.New(slog.DiscardHandler)))
}

// firstCommit is the work of a commit creating pair's pointer at
// generation 1, slowed by a sleep after its CAS so that two groups
// overlap.
func firstCommit(server string) commitWork {
	return func(ctx context.Context, tx pgx.Tx) (*pendingChange, error) {
		c := Commit{Snapshot: &catalogv1.Snapshot{ServerId: server, AudienceClass: "a.readers", Tenant: "tenant-a",
			ExpiresAt: timestamppb.New(time.Now().Add(time.Hour))}}
		// The pointer's first CAS, as a commit's statement begins.
		gen, now := int64(1), time.Time{}
		if err := tx.QueryRow(ctx, `INSERT INTO pointers (server_id, audience_class, tenant_id, generation, last_generation,
  state, moved_at, fresh_until, revision)
VALUES ($1, 'a.readers', 'tenant-a', 1, 1, 'ACTIVE', now(), now() + interval '1 hour', 0)
ON CONFLICT DO NOTHING RETURNING moved_at`, server).Scan(&now); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return nil, ErrCASConflict
			}
			return nil, err
		}
		if _, err := tx.Exec(ctx, `SELECT pg_sleep(0.01)`); err != nil {
			return nil, err
		}
		_, ch := activateChange(c, gen, "sha256:x", now)
		return ch, nil
	}
}

// Two groups holding rivals for the same pairs, formed in opposite orders
// (two workers whose queues filled differently), take the pairs' pointer
// rows in one order and never deadlock: one waits for the other, every
// pair has one winner, and no commit has to run again. In arrival order
// they deadlocked (CI saw "pointer CAS: deadlock detected" in
// TestGroupCommitKeepsEachCommitOnItsOwn).
func TestGroupsTakePointersInOneOrder(t *testing.T) {
	s := newInternalStore(t)
	const pairs = 24
	group := func(reverse bool) []*groupItem {
		var items []*groupItem
		for i := range pairs {
			server := fmt.Sprintf("srv%02d", i)
			items = append(items, &groupItem{ctx: context.Background(), key: server + "\x00a.readers", work: firstCommit(server), done: make(chan struct{})})
		}
		if reverse {
			slices.Reverse(items)
		}
		return items
	}
	a, b := group(false), group(true)
	var againA, againB []*groupItem
	var wg sync.WaitGroup
	wg.Go(func() { againA = s.runGroup(a) })
	wg.Go(func() { againB = s.runGroup(b) })
	wg.Wait()
	if len(againA)+len(againB) != 0 {
		for _, it := range append(againA, againB...) {
			t.Errorf("%q was aborted and must run again", it.key)
		}
		t.Fatal("the groups deadlocked")
	}
	won := map[string]int{}
	for _, it := range append(a, b...) {
		switch {
		case it.err == nil:
			won[it.key]++
		case !errors.Is(it.err, ErrCASConflict):
			t.Fatalf("%q: %v", it.key, it.err)
		}
	}
	if len(won) != pairs {
		t.Fatalf("%d pairs committed, want %d", len(won), pairs)
	}
	for k, n := range won {
		if n != 1 {
			t.Fatalf("%q: %d winners", k, n)
		}
	}
}

// A commit Postgres aborts for a deadlock or a serialization failure runs
// again in a later group, at most maxTries times; any other error ends it
// at once.
func TestGroupRunsAbortedCommitsAgain(t *testing.T) {
	s := newInternalStore(t)
	ctx := context.Background()
	abort := func(code string, failures int) (commitWork, *int) {
		runs := 0
		inner := firstCommit("srv-" + code + fmt.Sprint(failures))
		return func(ctx context.Context, tx pgx.Tx) (*pendingChange, error) {
			runs++
			if runs <= failures {
				return nil, fmt.Errorf("store: pointer CAS: %w", &pgconn.PgError{Code: code, Message: "aborted by the test"})
			}
			return inner(ctx, tx)
		}, &runs
	}
	for _, tc := range []struct {
		code     string
		failures int
		wantRuns int
		wantErr  bool
	}{
		{"40P01", 1, 2, false},
		{"40001", 2, 3, false},
		{"40P01", maxTries, maxTries, true},
		{"23505", 1, 1, true}, // a unique violation is no reason to run again
	} {
		work, runs := abort(tc.code, tc.failures)
		ch, err := s.group.commit(ctx, "srv", "a.readers", work)
		if (err != nil) != tc.wantErr || *runs != tc.wantRuns {
			t.Fatalf("%s failing %d times: err %v after %d runs, want error=%v after %d", tc.code, tc.failures, err, *runs, tc.wantErr, tc.wantRuns)
		}
		if err == nil && ch.rev == 0 {
			t.Fatalf("%s: committed without a revision", tc.code)
		}
	}
}

package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/postgres"
	"github.com/toolcrib/toolcrib/revision/lease"
	"github.com/toolcrib/toolcrib/services/lease/migrations"
)

func lockedStore(t *testing.T) (*Store, *pgxpool.Pool) {
	t.Helper()
	url := pgtest.NewDatabase(t, pgtest.Schema{Name: "lease", Sets: []postgres.Set{migrations.Set()}})
	pool, err := postgres.Open(context.Background(), url, "lease")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return New(pool), pool
}

// waitForAdvisoryWaiter returns once a backend of the test's database waits
// on an advisory lock, or fails the test when done closes first (the call
// under test returned without waiting).
func waitForAdvisoryWaiter(t *testing.T, pool *pgxpool.Pool, done <-chan error, what string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("%s returned (%v) without waiting for the freeze lock held by another transaction", what, err)
		default:
		}
		var n int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'advisory'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s neither returned nor waited on the freeze lock within 30 s", what)
		}
	}
}

// TestAFirstFreezeWaitsForTheIssuanceUnderWay: a server that was never
// frozen has no freeze row, so no row lock can order its first Freeze
// after a batch of receipts under way; the freeze lock does. With a batch's
// share of the lock held, Freeze waits, and returns once it commits.
func TestAFirstFreezeWaitsForTheIssuanceUnderWay(t *testing.T) {
	ctx := context.Background()
	s, pool := lockedStore(t)
	batch, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = batch.Rollback(ctx) }()
	if _, err := batch.Exec(ctx, `SELECT pg_advisory_xact_lock_shared($1)`, freezeLockKey("never-frozen")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := s.Freeze(ctx, "never-frozen", true, "drill", "ops")
		done <- err
	}()
	waitForAdvisoryWaiter(t, pool, done, "Freeze")
	if err := batch.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Freeze after the batch committed: %v", err)
	}
}

// TestABatchWaitsForAFreezeUnderWayAndSeesIt: a server's first freeze is
// under way (its lock held, its row inserted, not committed); a receipt
// of that server waits for it and, once it commits, is refused as frozen
// (a row lock could not make it wait: the row is not there for it). And
// AutoFreeze waits for a batch's share of the lock as Freeze does.
func TestABatchWaitsForAFreezeUnderWayAndSeesIt(t *testing.T) {
	ctx := context.Background()
	s, pool := lockedStore(t)
	const server = "fresh"
	freeze, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = freeze.Rollback(ctx) }()
	if _, err := freeze.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, freezeLockKey(server)); err != nil {
		t.Fatal(err)
	}
	if _, err := freeze.Exec(ctx, `INSERT INTO freezes (server_id, frozen, changed_by, changed_at) VALUES ($1, true, 'ops', now())`, server); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		now := time.Now().Truncate(time.Second)
		_, err := s.RecordIssue(ctx, Issued{KeyID: "k", Claims: lease.Claims{ID: uuid.Must(uuid.NewV7()).String(), Subject: "alice", Tenant: "acme",
			Tool: server + ".t", Server: server, DescriptorDigest: "sha256:d", Generation: 1, ArgumentDigest: "sha256:a",
			Audience: "exec", HolderThumbprint: "x", Receipt: "r-1", IssuedAt: now, ExpiresAt: now.Add(30 * time.Second)}})
		done <- err
	}()
	waitForAdvisoryWaiter(t, pool, done, "RecordIssue")
	if err := freeze.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var fe *FrozenError
	if err := <-done; !errors.As(err, &fe) || fe.Server != server {
		t.Fatalf("a receipt recorded after its server's first freeze committed: %v", err)
	}
	batch, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = batch.Rollback(ctx) }()
	if _, err := batch.Exec(ctx, `SELECT pg_advisory_xact_lock_shared($1)`, freezeLockKey("auto-target")); err != nil {
		t.Fatal(err)
	}
	done = make(chan error, 1)
	go func() {
		_, err := s.AutoFreeze(ctx, "auto-target", 1, time.Now(), "rollback", "discovery")
		done <- err
	}()
	waitForAdvisoryWaiter(t, pool, done, "AutoFreeze")
	if err := batch.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestFreezeLockKeysAreDistinctAndOrdered: one key per server, in
// ascending order, whatever the batch's order and repeats.
func TestFreezeLockKeysAreDistinctAndOrdered(t *testing.T) {
	got := freezeLockKeys([]string{"b", "a", "b", "c", "a"})
	if len(got) != 3 {
		t.Fatalf("%d keys for 3 servers", len(got))
	}
	for i := 1; i < len(got); i++ {
		if got[i-1] >= got[i] {
			t.Fatalf("keys out of order: %v", got)
		}
	}
	if freezeLockKey("a") == freezeLockKey("b") {
		t.Fatal("two servers share a key")
	}
}

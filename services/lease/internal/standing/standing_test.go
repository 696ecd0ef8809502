package standing_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/postgres"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/revision/lease"
	"github.com/toolcrib/toolcrib/services/lease/internal/standing"
	"github.com/toolcrib/toolcrib/services/lease/internal/store"
	"github.com/toolcrib/toolcrib/services/lease/migrations"
)

func open(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := postgres.Open(context.Background(), url, "lease")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

type clock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

func claims(id string, iat time.Time) lease.Claims {
	return lease.Claims{ID: id, Tenant: "acme", Tool: "inv.reserve", Server: "inv", IssuedAt: iat, ExpiresAt: iat.Add(30 * time.Second)}
}

// syncedView is a view on a new lease database, with a clock the test
// moves, loaded once.
func syncedView(t *testing.T, window time.Duration) (*pgxpool.Pool, *store.Store, *clock, *standing.View) {
	t.Helper()
	url := pgtest.NewDatabase(t, pgtest.Schema{Name: "lease", Sets: []postgres.Set{migrations.Set()}})
	pool := open(t, url)
	st := store.New(pool)
	clk := &clock{}
	view := standing.New(standing.Options{Pool: pool, Store: st, Window: window, Now: clk.Now})
	if err := view.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	return pool, st, clk, view
}

// TestAnotherReplicasChangeArrivesByNotify: replica B's view (reloading
// only every hour, so only the NOTIFY can tell it) learns replica A's
// revocation and freeze within its window, without any call on B.
func TestAnotherReplicasChangeArrivesByNotify(t *testing.T) {
	url := pgtest.NewDatabase(t, pgtest.Schema{Name: "lease", Sets: []postgres.Set{migrations.Set()}})
	a, b := store.New(open(t, url)), open(t, url)
	view := standing.New(standing.Options{Pool: b, Store: store.New(b), Reload: time.Hour, Window: 2 * time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- view.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	c := claims("l-1", time.Now().Add(-time.Second))
	servicetest.Eventually(t, time.Second, "the first load", func() bool { st, err := view.Status(ctx, c); return err == nil && !st.Revoked && !st.Frozen })
	time.Sleep(200 * time.Millisecond) // LISTEN in place (it pokes a reload too)
	if _, err := a.Revoke(ctx, store.KindTool, "inv.reserve", "incident", "ops"); err != nil {
		t.Fatal(err)
	}
	servicetest.Eventually(t, time.Second, "B sees A's revocation", func() bool { st, _ := view.Status(ctx, c); return st.Revoked })
	if _, _, err := a.Freeze(ctx, "inv", true, "drill", "ops"); err != nil {
		t.Fatal(err)
	}
	servicetest.Eventually(t, time.Second, "B sees A's freeze", func() bool { st, _ := view.Status(ctx, c); return st.Frozen })
	// A lease issued after the revocation took effect is not revoked by it.
	if st, _ := view.Status(ctx, claims("l-2", time.Now().Add(time.Second))); st.Revoked {
		t.Fatal("a lease issued after the revocation is revoked")
	}
}

// TestAStaleViewReadsPostgres: a loaded view answers from memory (a change
// made behind its back is not seen yet); once its newest load is older than
// the window it answers from Postgres (the change is seen); a failed Sync
// makes it stale at once, and with Postgres gone Status fails: never a
// pass from a stale view.
func TestAStaleViewReadsPostgres(t *testing.T) {
	pool, st, clk, view := syncedView(t, time.Second)
	ctx := context.Background()
	c := claims("l-1", time.Now().Add(-time.Second))
	if _, _, err := st.Freeze(ctx, "inv", true, "drill", "ops"); err != nil {
		t.Fatal(err)
	}
	if got, err := view.Status(ctx, c); err != nil || got.Frozen {
		t.Fatalf("fresh view: %+v %v, want the loaded state (not frozen)", got, err)
	}
	clk.Advance(1100 * time.Millisecond)
	if got, err := view.Status(ctx, c); err != nil || !got.Frozen {
		t.Fatalf("stale view: %+v %v, want Postgres's state (frozen)", got, err)
	}
	if err := view.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := view.Status(ctx, c); !got.Frozen {
		t.Fatal("synced view does not hold the freeze")
	}
	pool.Close()
	if err := view.Sync(ctx); err == nil {
		t.Fatal("Sync on a closed pool succeeded")
	}
	if got, err := view.Status(ctx, c); err == nil {
		t.Fatalf("after a failed Sync with Postgres gone: %+v, want an error", got)
	}
}

// TestAnAnswerFromPostgresIsNotTakenBack: a stale view read a freeze and a
// revoked lease from Postgres; a load that started before that read (its
// rows older than the read's: modelled by undoing both rows behind the
// view's back and loading with the clock set before the read) keeps them,
// so the replica never says frozen, then not frozen (CI saw an Issue
// refused ISSUANCE_FROZEN and the next one let through to the generation
// check); a load that started after the read says what Postgres says.
func TestAnAnswerFromPostgresIsNotTakenBack(t *testing.T) {
	pool, st, clk, view := syncedView(t, time.Second)
	ctx := context.Background()
	c := claims("l-1", time.Now().Add(-time.Second))
	if _, _, err := st.Freeze(ctx, "inv", true, "drill", "ops"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Revoke(ctx, store.KindLease, "l-1", "incident", "ops"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(1100 * time.Millisecond)
	if got, err := view.Status(ctx, c); err != nil || !got.Frozen || !got.Revoked {
		t.Fatalf("stale view: %+v %v, want Postgres's state (frozen, revoked)", got, err)
	}
	if _, _, err := st.Freeze(ctx, "inv", false, "drill over", "ops"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM revocations WHERE target = 'l-1'`); err != nil {
		t.Fatal(err)
	}
	clk.Advance(-500 * time.Millisecond)
	if err := view.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := view.Status(ctx, c); err != nil || !got.Frozen || !got.Revoked {
		t.Fatalf("after a load older than the read: %+v %v, want frozen and revoked still", got, err)
	}
	if got, _ := view.Status(ctx, claims("l-2", c.IssuedAt)); got.Revoked || !got.Frozen {
		t.Fatalf("another lease of the frozen server: %+v, want frozen and not revoked", got)
	}
	clk.Advance(time.Second)
	if err := view.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := view.Status(ctx, c); err != nil || got.Frozen || got.Revoked {
		t.Fatalf("after a load newer than the read: %+v %v, want Postgres's state (neither)", got, err)
	}
}

// TestAFreezeAnIssueFoundIsKept: an issue's own transaction found the
// server frozen before the view loaded the freeze; from then on the view
// says frozen (the next Issue is refused ISSUANCE_FROZEN, not let through
// to the generation check), until a load that started later.
func TestAFreezeAnIssueFoundIsKept(t *testing.T) {
	_, _, clk, view := syncedView(t, time.Hour)
	ctx := context.Background()
	c := claims("l-1", time.Now())
	if got, _ := view.Status(ctx, c); got.Frozen {
		t.Fatal("frozen before any freeze")
	}
	view.SawFrozen("inv")
	if got, _ := view.Status(ctx, c); !got.Frozen {
		t.Fatal("the freeze an issue found is not said")
	}
	clk.Advance(-time.Second) // a load that started before the sighting
	if err := view.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := view.Status(ctx, c); !got.Frozen {
		t.Fatal("an older load took the freeze back")
	}
	clk.Advance(2 * time.Second)
	if err := view.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := view.Status(ctx, c); got.Frozen {
		t.Fatal("a newer load (Postgres holds no freeze) still says frozen")
	}
}

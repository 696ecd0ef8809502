package postgres_test

import (
	"context"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/postgres"
)

func TestMigrateAppliesOnceAndRefusesEditedMigrations(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t) // empty database, no schemas
	pool, err := postgres.Open(ctx, url, "inventory")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	set := postgres.Set{Name: "inventory", FS: os.DirFS("testdata/m1")}

	// Several starters at once: the advisory lock serializes them and each
	// migration is applied exactly once.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = postgres.Migrate(ctx, pool, "inventory", nil, set) }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM schema_migrations WHERE set_name = 'inventory'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("%d migrations recorded, want 2", n)
	}
	// search_path is the schema: unqualified names resolve there.
	if _, err := pool.Exec(ctx, "INSERT INTO items (id, name, note) VALUES (1, 'a', 'b')"); err != nil {
		t.Fatal(err)
	}
	// A migration edited after it was applied is refused, not re-run.
	err = postgres.Migrate(ctx, pool, "inventory", nil, postgres.Set{Name: "inventory", FS: os.DirFS("testdata/m2")})
	if err == nil || !strings.Contains(err.Error(), "was changed after it was applied") {
		t.Fatalf("edited migration: err = %v", err)
	}
}

func TestMigrateFailureLeavesNothingHalfApplied(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	pool, err := postgres.Open(ctx, url, "broken")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/0001_bad.sql", []byte("CREATE TABLE a (id int);\nCREATE TABLE oops (;"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = postgres.Migrate(ctx, pool, "broken", nil, postgres.Set{Name: "broken", FS: os.DirFS(dir)})
	if err == nil || !strings.Contains(err.Error(), "0001_bad.sql") {
		t.Fatalf("err = %v, want one naming the migration", err)
	}
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass('broken.a') IS NOT NULL").Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatal("the first statement of a failed migration was kept")
	}
}

func TestOpenRefusesBadSchemaName(t *testing.T) {
	if _, err := postgres.Open(context.Background(), pgtest.ServerURL(), "x; DROP TABLE y"); err == nil {
		t.Fatal("schema name with SQL accepted")
	}
}

// TestOpenSizesThePool: a URL without pool_max_conns gets at least
// DefaultMaxConns connections (pgxpool's own default is 4 on a 2-core
// machine); one that sets it gets exactly what it asked for.
func TestOpenSizesThePool(t *testing.T) {
	ctx := context.Background()
	for url, want := range map[string]int32{
		"postgres://postgres@127.0.0.1:1/db":                  max(postgres.DefaultMaxConns, int32(runtime.NumCPU())),
		"postgres://postgres@127.0.0.1:1/db?pool_max_conns=3": 3,
	} {
		pool, err := postgres.Open(ctx, url, "public")
		if err != nil {
			t.Fatal(err)
		}
		if got := pool.Config().MaxConns; got != want {
			t.Errorf("%s: MaxConns %d, want %d", url, got, want)
		}
		pool.Close()
	}
}

// Every pool plans its prepared statements generically unless its URL says
// otherwise (issue 27: re-planning was a fifth of discovery's Postgres CPU).
func TestOpenPlansGenericallyUnlessTheURLSaysOtherwise(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	for u, want := range map[string]string{
		url:                                "force_generic_plan",
		url + sep + "plan_cache_mode=auto": "auto",
	} {
		pool, err := postgres.Open(ctx, u, "public")
		if err != nil {
			t.Fatal(err)
		}
		var got string
		if err := pool.QueryRow(ctx, `SHOW plan_cache_mode`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		pool.Close()
		if got != want {
			t.Errorf("plan_cache_mode %q, want %q (url options %q)", got, want, strings.TrimPrefix(u, url))
		}
	}
}

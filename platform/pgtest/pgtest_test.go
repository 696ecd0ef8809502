package pgtest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/postgres"
)

// Two tests' databases are distinct, both migrated, and each is dropped when
// its test ends.
func TestDatabasesAreFreshIsolatedAndDropped(t *testing.T) {
	ctx := context.Background()
	schema := pgtest.Schema{Name: "iso", Sets: []postgres.Set{changelog.Migrations()}}
	var names [2]string
	for i := range names {
		t.Run("db", func(t *testing.T) {
			url := pgtest.NewDatabase(t, schema)
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&names[i]); err != nil {
				t.Fatal(err)
			}
			var n int
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM iso.changes").Scan(&n); err != nil {
				t.Fatalf("schema not migrated: %v", err)
			}
			if n != 0 {
				t.Fatalf("fresh database has %d changes", n)
			}
			// Write something; the next test's database must not see it.
			if _, err := conn.Exec(ctx, "INSERT INTO iso.changes (revision, kind, payload) VALUES (1, 'x', '')"); err != nil {
				t.Fatal(err)
			}
		})
	}
	if names[0] == names[1] {
		t.Fatal("two tests got the same database")
	}
	admin, err := pgx.Connect(ctx, pgtest.ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var left int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = ANY($1)", names[:]).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d test databases were not dropped", left)
	}
}

package main

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/toolcrib/toolcrib/platform/pgtest"
)

// `registry migrate` creates the registry's schema and the change log in an
// empty database, and is safe to run twice.
func TestMigrateSubcommand(t *testing.T) {
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	for range 2 {
		if err := run(ctx, []string{"migrate", "--postgres-url", url, "--log-level", "warn"}); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM registry.tools, registry.change_counter`).Scan(&n); err != nil {
		t.Fatalf("migrated schema: %v", err)
	}
}

package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolcrib/toolcrib/platform/postgres"
)

// DefaultURL is the server used when TOOLCRIB_TEST_POSTGRES_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// ServerURL returns the admin URL of the test server.
func ServerURL() string {
	if u := os.Getenv("TOOLCRIB_TEST_POSTGRES_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// WithDatabase returns base with its database name replaced.
func WithDatabase(base, db string) string {
	u, err := url.Parse(base)
	if err != nil {
		panic(err)
	}
	u.Path = "/" + db
	return u.String()
}

// Schema is one service schema and its migrations.
type Schema struct {
	// Name is the schema, e.g. `registry`.
	Name string
	// Sets are the migration sets, as the service passes them to
	// [postgres.Migrate].
	Sets []postgres.Set
}

// NewDatabase creates a fresh database holding the migrated schemas and
// returns its URL; the database is dropped when the test ends.
func NewDatabase(t testing.TB, schemas ...Schema) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, ServerURL())
	if err != nil {
		t.Fatalf("pgtest: connect to %s: %v (is PostgreSQL running?)", ServerURL(), err)
	}
	defer admin.Close(ctx)

	tpl, err := template(ctx, t, admin, schemas)
	if err != nil {
		t.Fatalf("pgtest: template: %v", err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	name := "toolcrib_test_" + hex.EncodeToString(b[:])
	// CREATE DATABASE ... TEMPLATE needs no other session on the template;
	// the advisory lock keeps template builders out meanwhile.
	if err := withLock(ctx, admin, "toolcrib.pgtest.template."+tpl, func() error {
		_, err := admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, tpl))
		return err
	}); err != nil {
		t.Fatalf("pgtest: create %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, ServerURL())
		if err != nil {
			t.Errorf("pgtest: drop %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name)); err != nil {
			t.Errorf("pgtest: drop %s: %v", name, err)
		}
	})
	return WithDatabase(ServerURL(), name)
}

func withLock(ctx context.Context, conn *pgx.Conn, key string, fn func() error) error {
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtext($1))", key); err != nil {
		return err
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(hashtext($1))", key) }()
	return fn()
}

// template returns the name of a migrated template database for schemas,
// building it if needed. Concurrent test processes wait on an advisory lock.
func template(ctx context.Context, t testing.TB, admin *pgx.Conn, schemas []Schema) (string, error) {
	fp := ""
	label := ""
	for _, s := range schemas {
		f, err := postgres.Fingerprint(s.Name, s.Sets...)
		if err != nil {
			return "", err
		}
		fp += f
		label += "_" + s.Name
	}
	sum := postgres.DigestString(fp)
	name := "toolcrib_tpl" + label + "_" + sum[:12]
	if len(name) > 63 {
		name = "toolcrib_tpl_" + sum[:16]
	}
	err := withLock(ctx, admin, "toolcrib.pgtest.template."+name, func() error {
		var ready bool
		err := admin.QueryRow(ctx, `SELECT coalesce(shobj_description(oid, 'pg_database') = 'ready', false)
FROM pg_database WHERE datname = $1`, name).Scan(&ready)
		if err == nil && ready {
			return nil
		}
		if err != nil && err != pgx.ErrNoRows {
			return err
		}
		// Absent, or left half-built by a crashed run: build it afresh.
		if _, err := admin.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name)); err != nil {
			return err
		}
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
			return err
		}
		for _, s := range schemas {
			pool, err := postgres.Open(ctx, WithDatabase(ServerURL(), name), s.Name)
			if err != nil {
				return err
			}
			err = postgres.Migrate(ctx, pool, s.Name, nil, s.Sets...)
			pool.Close()
			if err != nil {
				return err
			}
		}
		_, err = admin.Exec(ctx, fmt.Sprintf("COMMENT ON DATABASE %s IS 'ready'", name))
		return err
	})
	return name, err
}

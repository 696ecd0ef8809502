package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// DefaultMaxConns is the least size of a pool whose URL does not set
// `pool_max_conns` (connections are opened on demand).
const DefaultMaxConns = 12

// Open returns a pool whose connections use schema as search_path. It does
// not wait for the server: the first query (or [Ping]) connects, so a
// service can start and report NOT_SERVING while Postgres is down.
func Open(ctx context.Context, url, schema string) (*pgxpool.Pool, error) {
	if !schemaName.MatchString(schema) {
		return nil, fmt.Errorf("postgres: invalid schema name %q", schema)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse url: %w", err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	GenericPlans(cfg.ConnConfig)
	if !strings.Contains(url, "pool_max_conns") {
		// pgxpool's default is max(4, NumCPU): on a small machine a service
		// answering many concurrent callers (the registry serving every
		// discovery worker) queued its calls on 4 connections, each write
		// holding one while it waits for its turn on the change log.
		cfg.MaxConns = max(cfg.MaxConns, DefaultMaxConns)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 5e9 // 5s
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open pool: %w", err)
	}
	return pool, nil
}

// GenericPlans makes the connections of cfg plan each prepared statement
// once, generically (`plan_cache_mode = force_generic_plan`), unless the
// URL sets plan_cache_mode itself. pgx prepares every statement once per
// connection, and the services' statements are key lookups and unnest
// batches whose best plan does not depend on the values; yet Postgres's
// default planned them anew on most executions: a custom plan on each
// connection's first five, and on every one where the generic plan's
// estimate looked worse (River's job completion, discovery's run start and
// pointer view, the registry's batched binding reads). In discovery's
// 800-server bench that planning was ~20 % of Postgres's CPU; forcing the
// generic plan took 0.7–0.9 s of Postgres CPU (~10 %) off the run (issue 27).
func GenericPlans(cfg *pgx.ConnConfig) {
	if _, set := cfg.RuntimeParams["plan_cache_mode"]; !set {
		cfg.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	}
}

// Set is one named sequence of migrations.
type Set struct {
	// Name identifies the set within a schema, e.g. `registry`, `changelog`.
	Name string
	// FS holds files `NNNN_description.sql` at its root.
	FS fs.FS
}

type migration struct {
	set      string
	version  int
	name     string
	sql      string
	checksum string
}

func load(set Set) ([]migration, error) {
	entries, err := fs.ReadDir(set.FS, ".")
	if err != nil {
		return nil, fmt.Errorf("postgres: read migrations of %s: %w", set.Name, err)
	}
	var out []migration
	seen := map[int]string{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("postgres: migration %s/%s: name must be NNNN_description.sql", set.Name, e.Name())
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("postgres: migrations %s and %s of %s share version %d", prev, e.Name(), set.Name, v)
		}
		seen[v] = e.Name()
		body, err := fs.ReadFile(set.FS, e.Name())
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(body)
		out = append(out, migration{set: set.Name, version: v, name: e.Name(), sql: string(body), checksum: hex.EncodeToString(sum[:])})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// Fingerprint returns a digest of every migration of the sets, so a test
// template database can be reused exactly while its migrations are equal.
func Fingerprint(schema string, sets ...Set) (string, error) {
	h := sha256.New()
	h.Write([]byte(schema))
	for _, s := range sets {
		ms, err := load(s)
		if err != nil {
			return "", err
		}
		for _, m := range ms {
			fmt.Fprintf(h, "\x00%s\x00%d\x00%s", m.set, m.version, m.checksum)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// Migrate applies the pending migrations of every set to schema, in set
// order and version order, each in its own transaction. It is safe to call
// from several processes at once.
func Migrate(ctx context.Context, pool *pgxpool.Pool, schema string, logger *slog.Logger, sets ...Set) error {
	if !schemaName.MatchString(schema) {
		return fmt.Errorf("postgres: invalid schema name %q", schema)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: migrate %s: %w", schema, err)
	}
	defer conn.Release()
	lockKey := "toolcrib.migrate." + schema
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtext($1))", lockKey); err != nil {
		return fmt.Errorf("postgres: migrate %s: lock: %w", schema, err)
	}
	defer func() {
		// Unlock on a fresh context: the caller's may be done.
		_, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(hashtext($1))", lockKey)
	}()
	q := pgx.Identifier{schema}.Sanitize()
	if _, err := conn.Exec(ctx, fmt.Sprintf(`CREATE SCHEMA IF NOT EXISTS %s;
CREATE TABLE IF NOT EXISTS %s.schema_migrations (
  set_name   text        NOT NULL,
  version    integer     NOT NULL,
  name       text        NOT NULL,
  checksum   text        NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (set_name, version)
)`, q, q)); err != nil {
		return fmt.Errorf("postgres: migrate %s: bootstrap: %w", schema, err)
	}
	applied := map[string]string{}
	rows, err := conn.Query(ctx, fmt.Sprintf("SELECT set_name, version, checksum FROM %s.schema_migrations", q))
	if err != nil {
		return fmt.Errorf("postgres: migrate %s: %w", schema, err)
	}
	for rows.Next() {
		var set, sum string
		var v int
		if err := rows.Scan(&set, &v, &sum); err != nil {
			rows.Close()
			return err
		}
		applied[set+"/"+strconv.Itoa(v)] = sum
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, set := range sets {
		ms, err := load(set)
		if err != nil {
			return err
		}
		for _, m := range ms {
			key := m.set + "/" + strconv.Itoa(m.version)
			if sum, ok := applied[key]; ok {
				if sum != m.checksum {
					return fmt.Errorf("postgres: migration %s/%s was changed after it was applied to %s (checksum %s, now %s)", m.set, m.name, schema, sum[:12], m.checksum[:12])
				}
				continue
			}
			if err := apply(ctx, conn.Conn(), schema, m); err != nil {
				return err
			}
			if logger != nil {
				logger.InfoContext(ctx, "migration applied", "schema", schema, "set", m.set, "migration", m.name)
			}
		}
	}
	return nil
}

func apply(ctx context.Context, conn *pgx.Conn, schema string, m migration) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	q := pgx.Identifier{schema}.Sanitize()
	if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+q); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, m.sql); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			return fmt.Errorf("postgres: migration %s/%s: %s (line %d): %w", m.set, m.name, pe.Message, pe.Line, err)
		}
		return fmt.Errorf("postgres: migration %s/%s: %w", m.set, m.name, err)
	}
	if _, err := tx.Exec(ctx, fmt.Sprintf("INSERT INTO %s.schema_migrations (set_name, version, name, checksum) VALUES ($1, $2, $3, $4)", q),
		m.set, m.version, m.name, m.checksum); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// IsUniqueViolation reports whether err is a unique-constraint violation,
// optionally of the named constraint.
func IsUniqueViolation(err error, constraint string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && (constraint == "" || pe.ConstraintName == constraint)
}

// IsSerializationFailure reports whether err is a serialization failure or
// deadlock, which the caller may retry.
func IsSerializationFailure(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// InTx runs fn in a transaction and commits it, rolling back on any error
// or panic.
func InTx(ctx context.Context, pool *pgxpool.Pool, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, pool, fn)
}

// DigestString returns the hex sha256 of s.
func DigestString(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

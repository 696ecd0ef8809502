package store

import (
	"context"
	"io"
	"io/fs"
	"log/slog"
	"strings"
	"testing"
	"testing/fstest"

	"google.golang.org/protobuf/proto"

	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/postgres"
	"github.com/toolcrib/toolcrib/services/registry/migrations"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// atFirstMigration returns a pool on a database migrated only up to the
// registry's migration 1, as a deployment from before tenancy is.
func atFirstMigration(t *testing.T) (url string) {
	t.Helper()
	first, err := fs.ReadFile(migrations.Set().FS, "0001_registry.sql")
	if err != nil {
		t.Fatal(err)
	}
	set := postgres.Set{Name: "registry", FS: fstest.MapFS{"0001_registry.sql": {Data: first}}}
	return pgtest.NewDatabase(t, pgtest.Schema{Name: "registry", Sets: []postgres.Set{set, changelog.Migrations()}})
}

func migrateAll(ctx context.Context, t *testing.T, url string) error {
	t.Helper()
	pool, err := postgres.Open(ctx, url, "registry")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return postgres.Migrate(ctx, pool, "registry", nil, migrations.Set(), changelog.Migrations())
}

// Migration 2 refuses to run over server owners that name no tenant
// (`group:x`, `alice`): binding them to a tenant would be a guess. The
// message says how to rewrite them; after that the migration runs.
func TestMigrationRefusesOwnersWithoutTenant(t *testing.T) {
	ctx := context.Background()
	url := atFirstMigration(t)
	pool, err := postgres.Open(ctx, url, "registry")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `INSERT INTO servers (server_id, owner, transport, url, trust_level, revision_source) VALUES
('a', 'group:inventory-team', 'streamable_http', 'https://a.example.test/', 1, 1),
('b', 'alice', 'streamable_http', 'https://b.example.test/', 1, 1),
('c', 'tenant-a/group:ok', 'streamable_http', 'https://c.example.test/', 1, 1)`); err != nil {
		t.Fatal(err)
	}
	err = migrateAll(ctx, t, url)
	if err == nil || !strings.Contains(err.Error(), "2 server owner(s) name no tenant") || !strings.Contains(err.Error(), "UPDATE registry.servers") {
		t.Fatalf("migration over unbound owners: %v", err)
	}
	if _, err := pool.Exec(ctx, `UPDATE servers SET owner = 'tenant-a/' || CASE WHEN owner LIKE 'group:%' THEN owner ELSE 'user:' || owner END
WHERE owner !~ '^[a-z0-9-]+/(group|user):'`); err != nil {
		t.Fatal(err)
	}
	if err := migrateAll(ctx, t, url); err != nil {
		t.Fatalf("after the rewrite the hint gives: %v", err)
	}
	var owners []string
	if err := pool.QueryRow(ctx, "SELECT array_agg(owner ORDER BY server_id) FROM servers").Scan(&owners); err != nil {
		t.Fatal(err)
	}
	if strings.Join(owners, ",") != "tenant-a/group:inventory-team,tenant-a/user:alice,tenant-a/group:ok" {
		t.Fatalf("owners %v", owners)
	}
	if _, err := pool.Exec(ctx, "UPDATE servers SET owner = 'group:x' WHERE server_id = 'a'"); err == nil {
		t.Fatal("an owner without a tenant was stored after the migration")
	}
}

// A tenant that existed before migration 2 keeps answering its current
// policy at its current epoch (the migration copies it into the history);
// epochs before that are OUT_OF_RANGE EPOCH_BEFORE_HISTORY, not a wrong
// answer.
func TestMigrationStartsHistoryAtTheCurrentEpoch(t *testing.T) {
	ctx := context.Background()
	url := atFirstMigration(t)
	pool, err := postgres.Open(ctx, url, "registry")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `INSERT INTO servers (server_id, owner, transport, url, trust_level, revision_source) VALUES
('srv', 'acme/group:ops', 'streamable_http', 'https://a.example.test/', 1, 1);
INSERT INTO tenants (tenant_id, policy_epoch) VALUES ('acme', 7);
INSERT INTO audience_classes (name, tenant_id) VALUES ('acme.readers', 'acme');
INSERT INTO audience_servers (class_name, server_id, secret_ref, position) VALUES ('acme.readers', 'srv', 'env:X', 0);
INSERT INTO grants (tenant_id, grp, scopes, audience_classes) VALUES ('acme', 'readers', '{a:read}', '{acme.readers}')`); err != nil {
		t.Fatal(err)
	}
	if err := migrateAll(ctx, t, url); err != nil {
		t.Fatal(err)
	}
	s := New(pool, changelog.New(pool, "registry_changes", slog.New(slog.NewTextHandler(io.Discard, nil))))
	cur, _, err := s.GetPolicy(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	at7, _, err := s.GetPolicyAt(ctx, "acme", 7)
	if err != nil || !proto.Equal(cur, at7) || len(at7.GetGrants()) != 1 || len(at7.GetAudienceClasses()) != 1 {
		t.Fatalf("policy at the migration's epoch:\n%v\n%v (%v)", cur, at7, err)
	}
	_, _, err = s.GetPolicyAt(ctx, "acme", 6)
	if e, ok := err.(*EpochError); !ok || e.Reason != ReasonEpochBeforeHistory || e.Since != 7 {
		t.Fatalf("before the history: %v", err)
	}
	_, _, err = s.GetPolicyAt(ctx, "acme", 8)
	if e, ok := err.(*EpochError); !ok || e.Reason != ReasonEpochNotReached {
		t.Fatalf("not reached: %v", err)
	}
}

// Migration 4 keeps today's behaviour for every existing audience class:
// it writes no stage, and every (server, class) pair a class covers reads
// as FULL at version 0, in the current policy and at the current epoch,
// and the tenant's epoch does not move.
func TestMigrationLeavesExistingClassesAtFull(t *testing.T) {
	ctx := context.Background()
	files := fstest.MapFS{}
	for _, name := range []string{"0001_registry.sql", "0002_tenancy.sql", "0003_tool_variants.sql"} {
		b, err := fs.ReadFile(migrations.Set().FS, name)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = &fstest.MapFile{Data: b}
	}
	url := pgtest.NewDatabase(t, pgtest.Schema{Name: "registry", Sets: []postgres.Set{{Name: "registry", FS: files}, changelog.Migrations()}})
	pool, err := postgres.Open(ctx, url, "registry")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `INSERT INTO servers (server_id, owner, transport, url, trust_level, revision_source) VALUES
('srv', 'acme/group:ops', 'streamable_http', 'https://a.example.test/', 1, 1);
INSERT INTO tenants (tenant_id, policy_epoch, history_since) VALUES ('acme', 7, 7);
INSERT INTO audience_classes (name, tenant_id) VALUES ('acme.readers', 'acme');
INSERT INTO audience_servers (class_name, server_id, secret_ref, position) VALUES ('acme.readers', 'srv', 'env:X', 0);
INSERT INTO class_history (name, tenant_id, description, version, updated_at, server_ids, secret_refs, from_epoch)
VALUES ('acme.readers', 'acme', '', 1, now(), '{srv}', '{env:X}', 7)`); err != nil {
		t.Fatal(err)
	}
	if err := migrateAll(ctx, t, url); err != nil {
		t.Fatal(err)
	}
	s := New(pool, changelog.New(pool, "registry_changes", slog.New(slog.NewTextHandler(io.Discard, nil))))
	cur, _, err := s.GetPolicy(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	at7, _, err := s.GetPolicyAt(ctx, "acme", 7)
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultStage("srv", "acme.readers")
	for name, p := range map[string]*registryv1.Policy{"current": cur, "at epoch 7": at7} {
		if p.GetPolicyEpoch() != 7 || len(p.GetRolloutStages()) != 1 || !proto.Equal(p.GetRolloutStages()[0], want) {
			t.Fatalf("%s policy after migration 4: epoch %d, stages %v; want epoch 7 and %v", name, p.GetPolicyEpoch(), p.GetRolloutStages(), want)
		}
	}
	if want.GetStage() != registryv1.Stage_STAGE_FULL || want.GetVersion() != 0 {
		t.Fatalf("the default stage is %v", want)
	}
}

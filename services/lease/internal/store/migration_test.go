package store_test

import (
	"context"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/uuid"

	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/postgres"
	"github.com/toolcrib/toolcrib/services/lease/internal/store"
	"github.com/toolcrib/toolcrib/services/lease/migrations"
)

// Migration 6 gives a lease and its execution receipt one id. The rows
// written before it keep their two ids and stay readable; a row with two
// ids is still accepted after it (an older replica writes them while the
// replicas are rolled), and lease ids stay unique among such rows; a row
// with one id is refused a second time by the primary key; the primary key
// answers an audit by time range through receipt_id_at.
func TestMigrationGivesALeaseAndItsReceiptOneID(t *testing.T) {
	ctx := context.Background()
	files := fstest.MapFS{}
	for _, name := range []string{"0001_lease.sql", "0002_discovery_freezes.sql", "0003_change_notify.sql",
		"0004_receipt_single_use.sql", "0005_receipts_time_index.sql"} {
		b, err := fs.ReadFile(migrations.Set().FS, name)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = &fstest.MapFile{Data: b}
	}
	url := pgtest.NewDatabase(t, pgtest.Schema{Name: "lease", Sets: []postgres.Set{{Name: "lease", FS: files}}})
	pool, err := postgres.Open(ctx, url, "lease")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	// A row as the lease service wrote them before: two UUIDv7 ids.
	oldReceipt, oldLease := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7()).String()
	now := time.Now().Truncate(time.Second)
	if _, err := pool.Exec(ctx, `INSERT INTO execution_receipts (receipt_id, lease_id, admission_receipt_id, subject, tenant_id,
  tool_id, server_id, descriptor_digest, generation, policy_epoch, argument_digest, audience, holder_thumbprint, key_id,
  issued_at, expires_at, claims_receipt)
VALUES ($1, $2, 'r-old', 'alice', 'acme', 'inv.reserve', 'inv', 'sha256:d', 1, 0, 'sha256:a', 'exec', 'x', 'k', $3, $4, true)`,
		oldReceipt, oldLease, now, now.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if err := postgres.Migrate(ctx, pool, "lease", nil, migrations.Set()); err != nil {
		t.Fatal(err)
	}
	s := store.New(pool)
	if lid, rid, err := s.ExecutionReceipt(ctx, oldReceipt.String()); err != nil || lid != oldLease || rid != "r-old" {
		t.Fatalf("the row from before migration 6: %q %q %v", lid, rid, err)
	}

	from := time.Now()
	time.Sleep(2 * time.Millisecond)
	c := claims("new", time.Now())
	c.ID = uuid.Must(uuid.NewV7()).String()
	id, err := s.RecordIssue(ctx, store.Issued{Claims: c, KeyID: "k"})
	if err != nil || id != c.ID {
		t.Fatalf("RecordIssue = %q, %v; want the lease id %q", id, err, c.ID)
	}
	if lid, rid, err := s.ExecutionReceipt(ctx, c.ID); err != nil || lid != c.ID || rid != "r-new" {
		t.Fatalf("the new row read by its lease id: %q %q %v", lid, rid, err)
	}
	time.Sleep(2 * time.Millisecond)
	to := time.Now()

	// Recorded again, the new row's lease id is refused by the primary key.
	again := claims("again", time.Now())
	again.ID = c.ID
	if _, err := s.RecordIssue(ctx, store.Issued{Claims: again, KeyID: "k"}); err == nil || !strings.Contains(err.Error(), "execution_receipts_pkey") {
		t.Fatalf("lease id %s recorded again: %v; want a refusal by the primary key", c.ID, err)
	}
	// A row with two ids, as an older replica writes it during the roll:
	// accepted, and refused when it repeats another such row's lease id.
	twoIDs := func(lease string) error {
		_, err := pool.Exec(ctx, `INSERT INTO execution_receipts (receipt_id, lease_id, subject, tool_id, server_id,
  descriptor_digest, generation, policy_epoch, argument_digest, audience, holder_thumbprint, key_id, issued_at, expires_at)
VALUES ($1, $2, 'alice', 'inv.reserve', 'inv', 'sha256:d', 1, 0, 'sha256:a', 'exec', 'x', 'k', $3, $4)`,
			uuid.Must(uuid.NewV7()), lease, now, now.Add(30*time.Second))
		return err
	}
	rolled := uuid.Must(uuid.NewV7()).String()
	if err := twoIDs(rolled); err != nil {
		t.Fatalf("a row with two ids after migration 6: %v", err)
	}
	for _, lease := range []string{rolled, oldLease} {
		if err := twoIDs(lease); err == nil || !strings.Contains(err.Error(), "execution_receipts_two_id_lease_id") {
			t.Fatalf("a second row with two ids and lease id %s: %v; want a refusal by the partial unique index", lease, err)
		}
	}

	// An audit by time range through the primary key: the new row only.
	rows, err := pool.Query(ctx, `SELECT lease_id FROM execution_receipts
WHERE receipt_id >= receipt_id_at($1) AND receipt_id < receipt_id_at($2)`, from, to)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			t.Fatal(err)
		}
		got = append(got, l)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != c.ID {
		t.Fatalf("receipts recorded between %v and %v: %v; want [%s]", from, to, got, c.ID)
	}
	// The range can be read from the primary key (on a table this small a
	// sequential scan is cheaper, so the planner is told to avoid one).
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var plan string
	if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, `EXPLAIN (COSTS OFF) SELECT lease_id FROM execution_receipts
WHERE receipt_id >= receipt_id_at('2026-12-04') AND receipt_id < receipt_id_at('2026-12-05')`).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "execution_receipts_pkey") {
		t.Fatalf("an audit by time range does not read the primary key: %s", plan)
	}
}

// RecordIssue refuses a lease id that is not a UUID in its canonical form
// (the execution receipt's id is the lease id) and writes nothing.
func TestRecordIssueRefusesALeaseIDThatIsNotAUUID(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	now := time.Now()
	for _, id := range []string{"", "l1", strings.ToUpper(leaseID("upper")), "{" + leaseID("braces") + "}", "urn:uuid:" + leaseID("urn")} {
		c := claims("x", now)
		c.ID = id
		if got, err := s.RecordIssue(ctx, store.Issued{Claims: c, KeyID: "k"}); err == nil || !strings.Contains(err.Error(), "not a UUID") {
			t.Errorf("lease id %q: %q, %v", id, got, err)
		}
	}
	// Nothing was written: the admission receipt the refused calls named is
	// still unclaimed.
	if _, err := s.RecordIssue(ctx, store.Issued{Claims: claims("x", now), KeyID: "k"}); err != nil {
		t.Fatal(err)
	}
}

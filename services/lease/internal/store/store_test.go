package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/postgres"
	"github.com/toolcrib/toolcrib/revision/lease"
	"github.com/toolcrib/toolcrib/services/lease/internal/store"
	"github.com/toolcrib/toolcrib/services/lease/migrations"
)

func newStore(t testing.TB) *store.Store {
	t.Helper()
	url := pgtest.NewDatabase(t, pgtest.Schema{Name: "lease", Sets: []postgres.Set{migrations.Set()}})
	pool, err := postgres.Open(context.Background(), url, "lease")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return store.New(pool)
}

// leaseIDs holds the lease id made for each name a test uses.
var leaseIDs sync.Map

// leaseID is the lease id a test names name: a UUIDv7 (the store takes
// UUIDs, as Issue makes them) made the first time.
func leaseID(name string) string {
	id, _ := leaseIDs.LoadOrStore(name, uuid.Must(uuid.NewV7()).String())
	return id.(string)
}

func claims(name string, iat time.Time) lease.Claims {
	return lease.Claims{ID: leaseID(name), Subject: "alice", Tenant: "acme", Tool: "inv.reserve", Server: "inv", DescriptorDigest: "sha256:d",
		Generation: 1, ArgumentDigest: "sha256:a", Audience: "exec", HolderThumbprint: "x", Receipt: "r-" + name,
		IssuedAt: iat.Truncate(time.Second), ExpiresAt: iat.Truncate(time.Second).Add(30 * time.Second)}
}

func TestRecordIssueRefusesAFrozenServer(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	now := time.Now()
	id, err := s.RecordIssue(ctx, store.Issued{Claims: claims("l1", now), KeyID: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if lid, rid, err := s.ExecutionReceipt(ctx, id); err != nil || lid != leaseID("l1") || id != lid || rid != "r-l1" {
		t.Fatalf("receipt %s: %s %s %v", id, lid, rid, err)
	}
	if _, _, err := s.Freeze(ctx, "inv", true, "rollback", "ops"); err != nil {
		t.Fatal(err)
	}
	var fe *store.FrozenError
	if _, err := s.RecordIssue(ctx, store.Issued{Claims: claims("l2", now), KeyID: "k"}); !errors.As(err, &fe) || fe.Server != "inv" {
		t.Fatalf("RecordIssue on a frozen server = %v", err)
	}
	// The same lease id twice is refused by the database.
	if _, _, err := s.Freeze(ctx, "inv", false, "", "ops"); err != nil {
		t.Fatal(err)
	}
	again := claims("l1", now)
	again.Receipt = "r-other"
	if _, err := s.RecordIssue(ctx, store.Issued{Claims: again, KeyID: "k"}); err == nil || errors.Is(err, store.ErrReceiptUsed) {
		t.Fatalf("a lease id recorded twice: %v", err)
	}
	// A lifetime over 60 s is refused by the database too.
	c := claims("l3", now)
	c.ExpiresAt = c.IssuedAt.Add(61 * time.Second)
	if _, err := s.RecordIssue(ctx, store.Issued{Claims: c, KeyID: "k"}); err == nil {
		t.Fatal("a 61 s lease was recorded")
	}
}

func TestRevocationRefusesLeasesIssuedUntilIt(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	before := claims("l-before", time.Now().Add(-2*time.Second))
	for _, tc := range []struct{ kind, target string }{
		{store.KindLease, leaseID("l-before")}, {store.KindTool, "inv.reserve"}, {store.KindServer, "inv"}, {store.KindTenant, "acme"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			s := newStore(t)
			other := before
			other.ID, other.Tool, other.Server, other.Tenant = leaseID("l-other"), "b.x", "b", "beta"
			if _, err := s.Revoke(ctx, tc.kind, tc.target, "test", "ops"); err != nil {
				t.Fatal(err)
			}
			if st, err := s.Status(ctx, before); err != nil || !st.Revoked {
				t.Fatalf("Status of a revoked lease = %+v, %v", st, err)
			}
			if st, _ := s.Status(ctx, other); st.Revoked {
				t.Fatal("a revocation hit another target")
			}
		})
	}
	if _, err := s.Revoke(ctx, store.KindTool, "inv.reserve", "", "ops"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	after := claims("l-after", time.Now())
	if st, _ := s.Status(ctx, after); st.Revoked {
		t.Fatal("a lease issued after the revocation is refused")
	}
}

func TestFreezeKeepsChangedAtUntilTheStateChanges(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	f, at1, err := s.Freeze(ctx, "inv", true, "rollback", "ops")
	if err != nil || !f {
		t.Fatal(f, err)
	}
	_, at2, _ := s.Freeze(ctx, "inv", true, "again", "ops")
	if !at2.Equal(at1) {
		t.Fatal("freezing a frozen server moved changed_at")
	}
	if st, _ := s.Status(ctx, claims("x", time.Now())); !st.Frozen {
		t.Fatal("Status does not see the freeze")
	}
	if n, _ := s.FrozenCount(ctx); n != 1 {
		t.Fatalf("FrozenCount = %d", n)
	}
	f, at3, _ := s.Freeze(ctx, "inv", false, "resumed", "ops")
	if f || !at3.After(at1) {
		t.Fatal("resume did not move changed_at")
	}
	if st, _ := s.Status(ctx, claims("x", time.Now())); st.Frozen {
		t.Fatal("still frozen after resume")
	}
}

// TestAutoFreezeActsOncePerMove: a move freezes once; the same move again
// (a replayed stream, another replica) or an older one does nothing, so an
// operator's resume holds; a newer move freezes again; a move from before
// the service existed never freezes.
func TestAutoFreezeActsOncePerMove(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	now := time.Now()
	if froze, err := s.AutoFreeze(ctx, "old", 3, time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), "history", "w"); err != nil || froze {
		t.Fatalf("a move from before the service: froze=%v %v", froze, err)
	}
	if froze, err := s.AutoFreeze(ctx, "inv", 7, now, "rollback", "w"); err != nil || !froze {
		t.Fatalf("first sight: froze=%v %v", froze, err)
	}
	if st, err := s.Status(ctx, claims("l1", now)); err != nil || !st.Frozen {
		t.Fatalf("status after the freeze: %+v %v", st, err)
	}
	if _, _, err := s.Freeze(ctx, "inv", false, "reviewed", "op"); err != nil {
		t.Fatal(err)
	}
	for _, rev := range []int64{7, 5} {
		if froze, err := s.AutoFreeze(ctx, "inv", rev, now, "rollback", "w"); err != nil || froze {
			t.Fatalf("replay of revision %d: froze=%v %v", rev, froze, err)
		}
	}
	if st, err := s.Status(ctx, claims("l2", now)); err != nil || st.Frozen {
		t.Fatalf("the resume did not hold against a replay: %+v %v", st, err)
	}
	if froze, err := s.AutoFreeze(ctx, "inv", 8, now, "close", "w"); err != nil || !froze {
		t.Fatalf("a newer move: froze=%v %v", froze, err)
	}
	if n, err := s.FrozenCount(ctx); err != nil || n != 1 {
		t.Fatalf("frozen count %d %v", n, err)
	}
}

// TestRecordIssueGroupCommit: 64 concurrent RecordIssue calls (committed in
// shared batches) each return only once their own receipt is readable; a
// duplicate lease id among them fails alone; a frozen server's receipts
// are refused while another server's in the same batches are recorded.
func TestRecordIssueGroupCommit(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	if _, _, err := s.Freeze(ctx, "cold", true, "drill", "ops"); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := s.RecordIssue(ctx, store.Issued{Claims: claims("dup", now), KeyID: "k"}); err != nil {
		t.Fatal(err)
	}
	type result struct {
		lease, receipt string
		err            error
	}
	const n = 64
	results := make(chan result, n)
	for i := range n {
		go func() {
			c := claims(fmt.Sprintf("l-%d", i), now)
			switch {
			case i == 7:
				c.ID = leaseID("dup")
			case i%4 == 0:
				c.Server = "cold"
			}
			id, err := s.RecordIssue(ctx, store.Issued{Claims: c, KeyID: "k"})
			if err == nil {
				// Readable the moment RecordIssue returns: committed.
				if lid, _, rerr := s.ExecutionReceipt(ctx, id); rerr != nil || lid != c.ID {
					err = fmt.Errorf("receipt %s of %s not readable: %q %v", id, c.ID, lid, rerr)
				}
			}
			results <- result{lease: c.ID, receipt: id, err: err}
		}()
	}
	var recorded, frozen, dupFailed int
	for range n {
		r := <-results
		var fe *store.FrozenError
		switch {
		case r.lease == leaseID("dup"):
			if r.err == nil || errors.As(r.err, &fe) {
				t.Errorf("the duplicate lease id: %v", r.err)
			}
			dupFailed++
		case errors.As(r.err, &fe):
			if fe.Server != "cold" {
				t.Errorf("%s: frozen %q", r.lease, fe.Server)
			}
			frozen++
		case r.err != nil:
			t.Errorf("%s: %v", r.lease, r.err)
		default:
			recorded++
		}
	}
	if dupFailed != 1 || frozen != 16 || recorded != n-17 {
		t.Fatalf("recorded %d, frozen %d, duplicate failed %d", recorded, frozen, dupFailed)
	}
}

// An admission receipt is claimed by the one execution receipt recorded on
// it: a second RecordIssue on it is ErrReceiptUsed, sequentially, among
// concurrent calls of one replica (one batch or several) and across two
// replicas (stores) on one database; a refusal for a frozen server claims
// nothing.
func TestRecordIssueClaimsTheAdmissionReceiptOnce(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t, pgtest.Schema{Name: "lease", Sets: []postgres.Set{migrations.Set()}})
	replica := func() *store.Store {
		pool, err := postgres.Open(ctx, url, "lease")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return store.New(pool)
	}
	a, b := replica(), replica()
	now := time.Now()
	on := func(leaseID, receipt, server string) store.Issued {
		c := claims(leaseID, now)
		c.Receipt, c.Server = receipt, server
		return store.Issued{Claims: c, KeyID: "k"}
	}
	if _, err := a.RecordIssue(ctx, on("s1", "rcpt-seq", "inv")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.RecordIssue(ctx, on("s2", "rcpt-seq", "inv")); !errors.Is(err, store.ErrReceiptUsed) {
		t.Fatalf("a second lease on a receipt = %v, want ErrReceiptUsed", err)
	}

	// A frozen server's refusal leaves the receipt unclaimed.
	if _, _, err := a.Freeze(ctx, "cold", true, "drill", "ops"); err != nil {
		t.Fatal(err)
	}
	var fe *store.FrozenError
	if _, err := a.RecordIssue(ctx, on("f1", "rcpt-frozen", "cold")); !errors.As(err, &fe) {
		t.Fatalf("RecordIssue on a frozen server = %v", err)
	}
	if _, _, err := a.Freeze(ctx, "cold", false, "", "ops"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.RecordIssue(ctx, on("f2", "rcpt-frozen", "cold")); err != nil {
		t.Fatalf("the receipt a frozen refusal left: %v", err)
	}

	// 32 concurrent calls on one receipt, half on each replica, with 32
	// calls on receipts of their own in the same batches: one lease on
	// the shared receipt, every other call recorded.
	const n = 32
	type result struct {
		shared bool
		err    error
	}
	results := make(chan result, 2*n)
	for i := range n {
		st := a
		if i%2 == 1 {
			st = b
		}
		go func() {
			_, err := st.RecordIssue(ctx, on(fmt.Sprintf("c-%d", i), "rcpt-race", "inv"))
			results <- result{shared: true, err: err}
		}()
		go func() {
			_, err := st.RecordIssue(ctx, on(fmt.Sprintf("o-%d", i), fmt.Sprintf("rcpt-own-%d", i), "inv"))
			results <- result{err: err}
		}()
	}
	var won, used int
	for range 2 * n {
		r := <-results
		switch {
		case !r.shared && r.err != nil:
			t.Errorf("a call on its own receipt: %v", r.err)
		case !r.shared:
		case r.err == nil:
			won++
		case errors.Is(r.err, store.ErrReceiptUsed):
			used++
		default:
			t.Errorf("a call on the shared receipt: %v", r.err)
		}
	}
	if won != 1 || used != n-1 {
		t.Fatalf("on one receipt: %d leases recorded, %d refused as used; want 1 and %d", won, used, n-1)
	}
}

package artifact_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/postgres"
	"github.com/toolcrib/toolcrib/services/gateway/internal/artifact"
	"github.com/toolcrib/toolcrib/services/gateway/migrations"
)

func newStore(t *testing.T) *artifact.Store {
	t.Helper()
	url := pgtest.NewDatabase(t, pgtest.Schema{Name: "gateway", Sets: []postgres.Set{migrations.Set()}})
	pool, err := postgres.Open(context.Background(), url, "gateway")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return artifact.New(pool)
}

// roomy is a quota no test here reaches unless it means to.
var roomy = artifact.Quota{Bytes: 1 << 30, Count: 1000}

// TestOwnerScope: an artifact is read, listed and deleted only by the
// principal (tenant and subject) whose call made it; to any other — a
// user of the same tenant, the same subject name in another tenant — it
// does not exist, exactly as an id that never existed.
func TestOwnerScope(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	body := bytes.Repeat([]byte("x"), 5<<20)
	alice := artifact.Owner{Tenant: "tenant-a", Subject: "alice"}
	a, err := s.Put(ctx, artifact.Artifact{Tenant: alice.Tenant, Subject: alice.Subject, ToolID: "inventory.export", MIMEType: "text/plain", Body: body}, time.Hour, roomy)
	if err != nil {
		t.Fatal(err)
	}
	if a.Size != int64(len(body)) || a.SHA256 != artifact.Digest(body) {
		t.Fatalf("size %d digest %s", a.Size, a.SHA256)
	}
	for _, other := range []artifact.Owner{{Tenant: "tenant-a", Subject: "carol"}, {Tenant: "tenant-b", Subject: "alice"}, {Tenant: "tenant-b", Subject: "bob"}} {
		if _, err := s.Get(ctx, other, a.ID); err != artifact.ErrNotFound {
			t.Fatalf("%+v read alice's artifact: %v", other, err)
		}
		if l, err := s.List(ctx, other, 10); err != nil || len(l) != 0 {
			t.Fatalf("%+v lists %v %v", other, l, err)
		}
		if err := s.Delete(ctx, other, a.ID); err != artifact.ErrNotFound {
			t.Fatalf("%+v deleted alice's artifact: %v", other, err)
		}
	}
	if _, err := s.Get(ctx, alice, "4b0f7c2e-3f0a-4a57-9d1e-2b3f7c1a9e10"); err != artifact.ErrNotFound {
		t.Fatalf("an id that never existed: %v", err)
	}
	got, err := s.Get(ctx, alice, a.ID)
	if err != nil || !bytes.Equal(got.Body, body) || got.ToolID != "inventory.export" {
		t.Fatalf("alice reads %d bytes of %q, %v", len(got.Body), got.ToolID, err)
	}
	if l, err := s.List(ctx, alice, 10); err != nil || len(l) != 1 || l[0].ID != a.ID || l[0].Body != nil {
		t.Fatalf("alice lists %v %v", l, err)
	}
	if err := s.Delete(ctx, alice, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, alice, a.ID); !errors.Is(err, artifact.ErrNotFound) {
		t.Fatalf("a deleted artifact reads: %v", err)
	}
}

// TestQuota: a tenant's artifacts stay within its byte and count quota;
// the Put that would exceed one is refused naming it and stores nothing;
// every user of the tenant counts; another tenant has its own; expired
// and deleted artifacts free their share.
func TestQuota(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	now := time.Now()
	s.SetClock(func() time.Time { return now })
	q := artifact.Quota{Bytes: 100, Count: 3}
	put := func(tenant, subject string, size int, retention time.Duration) (artifact.Artifact, error) {
		return s.Put(ctx, artifact.Artifact{Tenant: tenant, Subject: subject, ToolID: "t.x", MIMEType: "text/plain",
			Body: bytes.Repeat([]byte("b"), size)}, retention, q)
	}
	quotaErr := func(err error) *artifact.QuotaError {
		t.Helper()
		var qe *artifact.QuotaError
		if !errors.As(err, &qe) || !errors.Is(err, artifact.ErrQuotaExceeded) {
			t.Fatalf("got %v, want a quota error", err)
		}
		return qe
	}
	if _, err := put("tenant-a", "alice", 101, time.Hour); quotaErr(err).Which != artifact.QuotaBytes || quotaErr(err).Limit != 100 || quotaErr(err).Size != 101 {
		t.Fatalf("a single artifact over the byte quota: %v", err)
	}
	if _, err := put("tenant-a", "alice", 40, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := put("tenant-a", "carol", 50, time.Hour); err != nil {
		t.Fatal(err)
	}
	// 40 + 50 + 11 > 100: carol's artifact counts against alice's call.
	if qe := quotaErr(func() error { _, err := put("tenant-a", "alice", 11, time.Hour); return err }()); qe.Which != artifact.QuotaBytes {
		t.Fatalf("over the byte quota: %+v", qe)
	}
	if _, err := put("tenant-b", "bob", 100, time.Hour); err != nil {
		t.Fatalf("tenant-b has its own quota: %v", err)
	}
	if _, err := put("tenant-a", "alice", 10, time.Hour); err != nil {
		t.Fatal(err)
	}
	if qe := quotaErr(func() error { _, err := put("tenant-a", "alice", 0, time.Hour); return err }()); qe.Which != artifact.QuotaCount || qe.Limit != 3 {
		t.Fatalf("over the count quota: %+v", qe)
	}
	if l, _ := s.List(ctx, artifact.Owner{Tenant: "tenant-a", Subject: "alice"}, 10); len(l) != 2 {
		t.Fatalf("a refused Put stored something: alice has %d artifacts", len(l))
	}
	// The 40-byte one expires: its share is free before any sweep.
	now = now.Add(2 * time.Minute)
	if _, err := put("tenant-a", "alice", 40, time.Hour); err != nil {
		t.Fatalf("after an expiry: %v", err)
	}
	l, _ := s.List(ctx, artifact.Owner{Tenant: "tenant-a", Subject: "carol"}, 10)
	if err := s.Delete(ctx, artifact.Owner{Tenant: "tenant-a", Subject: "carol"}, l[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := put("tenant-a", "alice", 50, time.Hour); err != nil {
		t.Fatalf("after a delete: %v", err)
	}
}

// TestQuotaHoldsUnderConcurrentReplicas: Puts racing on two stores (two
// pools: two gateway replicas) never take a tenant past its quota;
// exactly as many succeed as fit.
func TestQuotaHoldsUnderConcurrentReplicas(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t, pgtest.Schema{Name: "gateway", Sets: []postgres.Set{migrations.Set()}})
	var stores []*artifact.Store
	for range 2 {
		pool, err := postgres.Open(ctx, url, "gateway")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		stores = append(stores, artifact.New(pool))
	}
	for _, c := range []struct {
		name  string
		quota artifact.Quota
		size  int
		fit   int
	}{
		{name: "count", quota: artifact.Quota{Bytes: 1 << 20, Count: 5}, size: 10, fit: 5},
		{name: "bytes", quota: artifact.Quota{Bytes: 700, Count: 1000}, size: 100, fit: 7},
	} {
		t.Run(c.name, func(t *testing.T) {
			tenant := "tenant-" + c.name
			var wg sync.WaitGroup
			var mu sync.Mutex
			stored, refused := 0, 0
			for i := range 24 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := stores[i%2].Put(ctx, artifact.Artifact{Tenant: tenant, Subject: fmt.Sprintf("user-%d", i%3), ToolID: "t.x",
						MIMEType: "text/plain", Body: bytes.Repeat([]byte("c"), c.size)}, time.Hour, c.quota)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						stored++
					case errors.Is(err, artifact.ErrQuotaExceeded):
						refused++
					default:
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			if stored != c.fit || refused != 24-c.fit {
				t.Fatalf("%d stored, %d refused; want %d and %d", stored, refused, c.fit, 24-c.fit)
			}
		})
	}
}

// TestRetention: an expired artifact is not read, and Sweep deletes it
// and only it.
func TestRetention(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	now := time.Now()
	s.SetClock(func() time.Time { return now })
	old, err := s.Put(ctx, artifact.Artifact{Tenant: "tenant-a", Subject: "alice", ToolID: "t.x", MIMEType: "text/plain", Body: []byte("old")}, time.Minute, roomy)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := s.Put(ctx, artifact.Artifact{Tenant: "tenant-a", Subject: "alice", ToolID: "t.x", MIMEType: "text/plain", Body: []byte("new")}, time.Hour, roomy)
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Minute)
	if _, err := s.Get(ctx, artifact.Owner{Tenant: "tenant-a", Subject: "alice"}, old.ID); !errors.Is(err, artifact.ErrNotFound) {
		t.Fatalf("an expired artifact reads: %v", err)
	}
	n, err := s.Sweep(ctx)
	if err != nil || n != 1 {
		t.Fatalf("swept %d, %v; want 1", n, err)
	}
	if _, err := s.Get(ctx, artifact.Owner{Tenant: "tenant-a", Subject: "alice"}, fresh.ID); err != nil {
		t.Fatalf("the unexpired artifact: %v", err)
	}
}

func TestIDFromURI(t *testing.T) {
	for uri, ok := range map[string]bool{
		artifact.URIPrefix + "4b0f7c2e-3f0a-4a57-9d1e-2b3f7c1a9e10": true,
		artifact.URIPrefix + "not-a-uuid":                           false,
		"file:///etc/passwd":                                        false,
	} {
		if _, got := artifact.IDFromURI(uri); got != ok {
			t.Errorf("%s: %v, want %v", uri, got, ok)
		}
	}
}

package artifact_test

import (
	"bytes"
	"context"
	"errors"
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

// TestTenantScope: an artifact is read, listed and deleted only by its
// tenant; to any other it does not exist.
func TestTenantScope(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	body := bytes.Repeat([]byte("x"), 5<<20)
	a, err := s.Put(ctx, artifact.Artifact{Tenant: "tenant-a", Subject: "alice", ToolID: "inventory.export", MIMEType: "text/plain", Body: body}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if a.Size != int64(len(body)) || a.SHA256 != artifact.Digest(body) {
		t.Fatalf("size %d digest %s", a.Size, a.SHA256)
	}
	if _, err := s.Get(ctx, "tenant-b", a.ID); !errors.Is(err, artifact.ErrNotFound) {
		t.Fatalf("tenant-b read tenant-a's artifact: %v", err)
	}
	if l, err := s.List(ctx, "tenant-b", 10); err != nil || len(l) != 0 {
		t.Fatalf("tenant-b lists %v %v", l, err)
	}
	if err := s.Delete(ctx, "tenant-b", a.ID); !errors.Is(err, artifact.ErrNotFound) {
		t.Fatalf("tenant-b deleted tenant-a's artifact: %v", err)
	}
	got, err := s.Get(ctx, "tenant-a", a.ID)
	if err != nil || !bytes.Equal(got.Body, body) {
		t.Fatalf("tenant-a reads %d bytes, %v", len(got.Body), err)
	}
	if l, err := s.List(ctx, "tenant-a", 10); err != nil || len(l) != 1 || l[0].ID != a.ID || l[0].Body != nil {
		t.Fatalf("tenant-a lists %v %v", l, err)
	}
	if err := s.Delete(ctx, "tenant-a", a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "tenant-a", a.ID); !errors.Is(err, artifact.ErrNotFound) {
		t.Fatalf("a deleted artifact reads: %v", err)
	}
}

// TestRetention: an expired artifact is not read, and Sweep deletes it
// and only it.
func TestRetention(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	now := time.Now()
	s.SetClock(func() time.Time { return now })
	old, err := s.Put(ctx, artifact.Artifact{Tenant: "tenant-a", Subject: "alice", ToolID: "t.x", MIMEType: "text/plain", Body: []byte("old")}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := s.Put(ctx, artifact.Artifact{Tenant: "tenant-a", Subject: "alice", ToolID: "t.x", MIMEType: "text/plain", Body: []byte("new")}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Minute)
	if _, err := s.Get(ctx, "tenant-a", old.ID); !errors.Is(err, artifact.ErrNotFound) {
		t.Fatalf("an expired artifact reads: %v", err)
	}
	n, err := s.Sweep(ctx)
	if err != nil || n != 1 {
		t.Fatalf("swept %d, %v; want 1", n, err)
	}
	if _, err := s.Get(ctx, "tenant-a", fresh.ID); err != nil {
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

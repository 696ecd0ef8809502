package session

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/platform/redistest"
)

func TestSessionLifecycle(t *testing.T) {
	ctx := context.Background()
	r := redistest.NewClient(t)
	s := New(r)
	id, err := s.Create(ctx, Session{Token: "tok", CSRF: "c", Expires: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, id)
	if err != nil || got.Token != "tok" || got.CSRF != "c" {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	// The id is stored only as its hash: no key names it.
	keys, err := r.Keys(ctx, r.Prefix()+"*").Result()
	if err != nil || len(keys) != 1 || strings.Contains(keys[0], id) {
		t.Fatalf("keys %v (%v)", keys, err)
	}
	// Its TTL is the session's end, not longer.
	if ttl := r.TTL(ctx, keys[0]).Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("ttl %v", ttl)
	}
	if err := s.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after sign-out: %v", err)
	}
	// Hostile ids: empty, unknown, a megabyte.
	for _, bad := range []string{"", NewID(), strings.Repeat("x", 1<<20)} {
		if _, err := s.Get(ctx, bad); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%.10q…) = %v", bad, err)
		}
	}
	if _, err := s.Create(ctx, Session{Token: "tok", Expires: time.Now().Add(-time.Second)}); err == nil {
		t.Fatal("an expired session was stored")
	}
}

func TestPendingSignInIsSingleUse(t *testing.T) {
	ctx := context.Background()
	s := New(redistest.NewClient(t))
	if err := s.PutPending(ctx, "state", Pending{Verifier: "v", Nonce: "n"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	p, err := s.TakePending(ctx, "state")
	if err != nil || p.Verifier != "v" || p.Nonce != "n" {
		t.Fatalf("TakePending = %+v, %v", p, err)
	}
	if _, err := s.TakePending(ctx, "state"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a state used twice: %v", err)
	}
	if _, err := s.TakePending(ctx, strings.Repeat("s", 1000)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a long state: %v", err)
	}
}

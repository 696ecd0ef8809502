package keys

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/revision/lease"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// clock is a fake clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestFileIsPrivateAndSurvivesReopening(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "lease-keys.json")
	c := &clock{now: t0}
	r1, err := NewRing(ctx, NewFile(path), Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v", st.Mode().Perm(), err)
	}
	r2, err := NewRing(ctx, NewFile(path), Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	k1, _ := r1.Current()
	k2, _ := r2.Current()
	if k1.ID != k2.ID {
		t.Fatalf("a second process made its own key %s instead of using %s", k2.ID, k1.ID)
	}
}

func TestRingRotatesOnScheduleAndKeepsOldKeysUntilTheirLeasesExpire(t *testing.T) {
	ctx := context.Background()
	for name, open := range sources(t) {
		t.Run(name, func(t *testing.T) {
			c := &clock{now: t0}
			skew := 5 * time.Second
			src := open()
			r, err := NewRing(ctx, src, Options{RotateEvery: time.Hour, Skew: skew, Now: c.Now})
			if err != nil {
				t.Fatal(err)
			}
			first, _ := r.Current()

			// Not yet due: Maintain keeps the key.
			c.Advance(59 * time.Minute)
			if err := r.Maintain(ctx); err != nil {
				t.Fatal(err)
			}
			if k, _ := r.Current(); k.ID != first.ID {
				t.Fatal("rotated before RotateEvery")
			}
			// A lease signed with the first key at the last moment it is
			// current, for the longest lifetime.
			c.Advance(time.Minute)
			tok, kid, err := r.Sign(claims(c.Now(), lease.MaxTTL))
			if err != nil || kid != first.ID {
				t.Fatalf("Sign = %s, %v", kid, err)
			}
			if err := r.Maintain(ctx); err != nil {
				t.Fatal(err)
			}
			second, _ := r.Current()
			if second.ID == first.ID {
				t.Fatal("no rotation at RotateEvery")
			}
			if _, kid, _ := r.Sign(claims(c.Now(), time.Second)); kid != second.ID {
				t.Fatalf("new leases are signed with %s, not the new key %s", kid, second.ID)
			}
			// The old lease keeps verifying until it expires (exp + skew).
			c.Advance(lease.MaxTTL + skew - time.Second)
			if err := r.Maintain(ctx); err != nil {
				t.Fatal(err)
			}
			if _, ok := r.KeySet().Key(first.ID); !ok {
				t.Fatal("the old key left the key set while a lease it signed was live")
			}
			assertJWKSHas(t, r, first.ID, true)
			if f := checkFailure(t, r, tok, c.Now()); f != lease.Accepted && f != lease.ProofStale {
				t.Fatalf("old lease refused with %s before its expiry", f)
			}
			// Once every lease it signed has expired, it is unpublished and
			// destroyed.
			c.Advance(time.Second)
			if err := r.Maintain(ctx); err != nil {
				t.Fatal(err)
			}
			if _, ok := r.KeySet().Key(first.ID); ok {
				t.Fatal("the old key is still published after its last lease expired")
			}
			assertJWKSHas(t, r, first.ID, false)
			assertJWKSHas(t, r, second.ID, true)
			ks, _ := src.Keys(ctx)
			if _, ok := byID(ks)[first.ID]; ok {
				t.Fatal("the source still holds the expired key")
			}
		})
	}
}

func TestRingRotatesOnDemand(t *testing.T) {
	ctx := context.Background()
	c := &clock{now: t0}
	r, err := NewRing(ctx, &Memory{}, Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := r.Current()
	c.Advance(time.Second)
	if _, err := r.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	second, _ := r.Current()
	if second.ID == first.ID {
		t.Fatal("Rotate kept the key")
	}
	doc, cur, err := r.JWKS()
	if err != nil || cur != second.ID {
		t.Fatalf("JWKS current %s, %v", cur, err)
	}
	ks, err := lease.ParseKeySet(doc)
	if err != nil || ks.Len() != 2 {
		t.Fatalf("JWKS has %d keys, %v", ks.Len(), err)
	}
	// Scheduled rotation is off (RotateEvery 0): Maintain never rotates.
	c.Advance(1000 * time.Hour)
	if err := r.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	if k, _ := r.Current(); k.ID != second.ID {
		t.Fatal("Maintain rotated with RotateEvery 0")
	}
	if r.CurrentAge() != 1000*time.Hour {
		t.Fatalf("CurrentAge = %s", r.CurrentAge())
	}
}

// TestRingSeesAnotherReplicasRotation: two rings on one key file; after one
// rotates, the other's Refresh makes it sign with the new key and verify
// leases of both.
func TestRingSeesAnotherReplicasRotation(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "lease-keys.json")
	c := &clock{now: t0}
	a, _ := NewRing(ctx, NewFile(path), Options{Now: c.Now})
	b, _ := NewRing(ctx, NewFile(path), Options{Now: c.Now})
	c.Advance(time.Second)
	if _, err := a.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	ka, _ := a.Current()
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	kb, _ := b.Current()
	if ka.ID != kb.ID || b.KeySet().Len() != 2 {
		t.Fatalf("b signs with %s, a with %s; b publishes %d keys", kb.ID, ka.ID, b.KeySet().Len())
	}
}

func claims(now time.Time, ttl time.Duration) lease.Claims {
	return lease.Claims{ID: "l", Subject: "s", Tool: "srv.t", Server: "srv", DescriptorDigest: "sha256:d", Generation: 1,
		ArgumentDigest: "sha256:a", Audience: "exec", HolderThumbprint: "x", IssuedAt: now, ExpiresAt: now.Add(ttl)}
}

// checkFailure runs the lease through lease.Check with the ring's keys and
// no valid proof needed beyond the signature: it reports the failure before
// the proof rules, or ProofStale/BadProof when the lease itself passed.
func checkFailure(t *testing.T, r *Ring, tok string, now time.Time) lease.Failure {
	t.Helper()
	_, ref := lease.Check(lease.Input{Token: tok, Audience: "exec", Tool: "srv.t", ArgumentDigest: "sha256:a", Keys: r.KeySet(), Now: now, Skew: r.opts.Skew})
	if ref == nil {
		return lease.Accepted
	}
	if ref.Failure == lease.BadProof {
		return lease.Accepted // the lease passed; the test gave no proof
	}
	return ref.Failure
}

func assertJWKSHas(t *testing.T, r *Ring, id string, want bool) {
	t.Helper()
	doc, _, err := r.JWKS()
	if err != nil {
		t.Fatal(err)
	}
	ks, err := lease.ParseKeySet(doc)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ks.Key(id); ok != want {
		t.Fatalf("JWKS has %s = %v, want %v", id, ok, want)
	}
}

// TestAReplicaSigningWithARetiredKeyStaysVerifiable: replica A rotates;
// replica B, which reloads keys only every SignLag, still signs with the
// retired key just before its reload; that lease, of the longest lifetime,
// verifies against A's published keys until it expires, because the key
// stays published for MaxTTL + skew + SignLag.
func TestAReplicaSigningWithARetiredKeyStaysVerifiable(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "lease-keys.json")
	c := &clock{now: t0}
	const lag, skew = 30 * time.Second, time.Second
	a, _ := NewRing(ctx, NewFile(path), Options{Now: c.Now, Skew: skew, SignLag: lag})
	b, _ := NewRing(ctx, NewFile(path), Options{Now: c.Now, Skew: skew, SignLag: lag})
	old, _ := a.Current()
	if _, err := a.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	c.Advance(lag - time.Second) // B has not reloaded yet
	tok, kid, err := b.Sign(claims(c.Now(), lease.MaxTTL))
	if err != nil || kid != old.ID {
		t.Fatalf("B signed with %s (%v), want the retired %s", kid, err, old.ID)
	}
	c.Advance(lease.MaxTTL + skew - time.Second) // the lease's last second
	if err := a.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	if f := checkFailure(t, a, tok, c.Now()); f != lease.Accepted && f != lease.ProofStale {
		t.Fatalf("B's lease, signed with the retired key, refused by A with %s before its expiry", f)
	}
	c.Advance(2 * time.Second)
	if err := a.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	assertJWKSHas(t, a, old.ID, false)
}

func sources(t *testing.T) map[string]func() Source {
	return map[string]func() Source{
		"File":   func() Source { return NewFile(filepath.Join(t.TempDir(), "lease-keys.json")) },
		"Memory": func() Source { return &Memory{} },
	}
}

func byID(ks []Key) map[string]Key {
	m := map[string]Key{}
	for _, k := range ks {
		m[k.ID] = k
	}
	return m
}

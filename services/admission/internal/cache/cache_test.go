package cache

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	"github.com/toolcrib/toolcrib/platform/redisclient"
	"github.com/toolcrib/toolcrib/platform/redistest"
	"github.com/toolcrib/toolcrib/services/admission/internal/decision"
)

func genKey(tenant *rapid.Generator[string]) *rapid.Generator[Key] {
	s := rapid.StringMatching(`[a-z0-9:|._-]{0,12}`)
	n := rapid.Int64Range(0, 5)
	return rapid.Custom(func(t *rapid.T) Key {
		return Key{
			Tenant: tenant.Draw(t, "tenant"), AudienceClass: s.Draw(t, "class"),
			PolicyEpoch: n.Draw(t, "epoch"), Generation: n.Draw(t, "gen"), PointerRevision: n.Draw(t, "rev"),
			ToolID: s.Draw(t, "tool"), DescriptorDigest: s.Draw(t, "digest"), ScopeSetDigest: s.Draw(t, "scopes"),
			Mode:           admissionv1.Mode(rapid.Int32Range(0, 2).Draw(t, "mode")),
			PlanGeneration: n.Draw(t, "pgen"), PlanEpoch: n.Draw(t, "pepoch"),
		}
	})
}

// TestKeyInjective: two different keys never encode the same, whatever the
// field contents (separators included).
func TestKeyInjective(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := genKey(rapid.StringMatching(`[a-z0-9:|-]{0,8}`))
		a, b := g.Draw(t, "a"), g.Draw(t, "b")
		if a != b && a.String() == b.String() {
			t.Fatalf("%+v and %+v encode alike: %s", a, b, a.String())
		}
	})
}

// TestCrossTenantKeysNeverEqual: a tenant-b key never equals a tenant-a key
// for the same tool id and digest, whatever every other field holds (an
// attacker controls the class name, the plan fields and the mode).
func TestCrossTenantKeysNeverEqual(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ka := genKey(rapid.Just("tenant-a")).Draw(t, "a")
		kb := genKey(rapid.Just("tenant-b")).Draw(t, "b")
		kb.ToolID, kb.DescriptorDigest = ka.ToolID, ka.DescriptorDigest
		if ka.String() == kb.String() {
			t.Fatalf("cross-tenant key collision: %s", ka.String())
		}
		if !strings.HasPrefix(kb.String(), "8:tenant-b|") {
			t.Fatalf("the tenant is not the leading field: %s", kb.String())
		}
	})
}

// TestKeyUsesEveryField changes each field of a key in turn (by reflection,
// so a field added later is covered) and expects a different encoding.
func TestKeyUsesEveryField(t *testing.T) {
	base := Key{Tenant: "t", AudienceClass: "t.c", PolicyEpoch: 1, Generation: 1, PointerRevision: 1,
		ToolID: "s.x", DescriptorDigest: "d", ScopeSetDigest: "s", Mode: 1, PlanGeneration: 1, PlanEpoch: 1}
	rt := reflect.TypeOf(base)
	for i := range rt.NumField() {
		k := base
		f := reflect.ValueOf(&k).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(f.String() + "x")
		case reflect.Int64, reflect.Int32:
			f.SetInt(f.Int() + 1)
		case reflect.Uint8:
			f.SetUint(f.Uint() + 1)
		default:
			t.Fatalf("field %s of kind %v: extend this test", rt.Field(i).Name, f.Kind())
		}
		if k.String() == base.String() {
			t.Errorf("field %s does not take part in the key", rt.Field(i).Name)
		}
	}
}

// TestL1TellsEveryFieldApart: an entry put under one key is not found in
// L1 under a key that differs in any single field (L1 is keyed by the Key
// itself, L2 by its String).
func TestL1TellsEveryFieldApart(t *testing.T) {
	c := New(Options{L1Size: 64})
	defer c.Close()
	base := Key{Tenant: "t", AudienceClass: "t.c", PolicyEpoch: 1, Generation: 1, PointerRevision: 1,
		ToolID: "s.x", DescriptorDigest: "d", ScopeSetDigest: "s", Mode: 1, PlanGeneration: 1, PlanEpoch: 1}
	c.Put(base, Entry{Reason: decision.Allow, ExpiresAt: time.Now().Add(time.Minute)})
	if _, lvl := c.Get(context.Background(), base); lvl != L1 {
		t.Fatalf("the key itself: %v", lvl)
	}
	rt := reflect.TypeOf(base)
	for i := range rt.NumField() {
		k := base
		f := reflect.ValueOf(&k).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(f.String() + "x")
		case reflect.Int64, reflect.Int32:
			f.SetInt(f.Int() + 1)
		case reflect.Uint8:
			f.SetUint(f.Uint() + 1)
		default:
			t.Fatalf("field %s of kind %v: extend this test", rt.Field(i).Name, f.Kind())
		}
		if _, lvl := c.Get(context.Background(), k); lvl != Miss {
			t.Errorf("a key differing in %s was answered from %v", rt.Field(i).Name, lvl)
		}
	}
}

func TestScopeSetDigest(t *testing.T) {
	a := decision.Access{Scopes: []string{"a", "b"}, Classes: []string{"t.c"}}
	b := decision.Access{Scopes: []string{"ab"}, Classes: []string{"t.c"}}
	c := decision.Access{Scopes: []string{"a"}, Classes: []string{"b", "t.c"}}
	d := map[string]bool{}
	for _, x := range []string{ScopeSetDigest(a, nil), ScopeSetDigest(b, nil), ScopeSetDigest(c, nil), ScopeSetDigest(a, &a), ScopeSetDigest(a, &b)} {
		if d[x] {
			t.Fatalf("two access sets share a digest")
		}
		d[x] = true
	}
	if ScopeSetDigest(a, nil) != ScopeSetDigest(decision.Access{Scopes: []string{"a", "b"}, Classes: []string{"t.c"}}, nil) {
		t.Fatal("equal access, different digests")
	}
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func entry(exp time.Time) Entry {
	return Entry{Reason: decision.Allow, Detail: "allowed", InputSchemaDigest: "sha256:x", ExpiresAt: exp}
}

func TestL1AndL2(t *testing.T) {
	r := redistest.NewClient(t)
	clk := &clock{t: time.Now()}
	ctx := context.Background()
	k := Key{Tenant: "tenant-a", ToolID: "s.x", Generation: 3}
	a := New(Options{Redis: r, Now: clk.now})
	defer a.Close()
	if _, lvl := a.Get(ctx, k); lvl != Miss {
		t.Fatalf("empty cache: %v", lvl)
	}
	a.Put(k, entry(clk.t.Add(time.Minute)))
	if e, lvl := a.Get(ctx, k); lvl != L1 || e.Reason != decision.Allow {
		t.Fatalf("after Put: %v %+v", lvl, e)
	}
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// A second replica (its own L1) sees the entry through Redis.
	b := New(Options{Redis: r, Now: clk.now})
	defer b.Close()
	if e, lvl := b.Get(ctx, k); lvl != L2 || e.InputSchemaDigest != "sha256:x" {
		t.Fatalf("other replica: %v %+v", lvl, e)
	}
	if _, lvl := b.Get(ctx, k); lvl != L1 {
		t.Fatalf("L2 hit not kept in L1: %v", lvl)
	}
	// Another tenant's key with the same tool id, generation and digest
	// misses on both levels.
	other := k
	other.Tenant = "tenant-b"
	if _, lvl := b.Get(ctx, other); lvl != Miss {
		t.Fatalf("tenant-b hit tenant-a's entry at %v", lvl)
	}
	// Expiry: neither level serves an expired entry.
	clk.t = clk.t.Add(2 * time.Minute)
	if _, lvl := a.Get(ctx, k); lvl != Miss {
		t.Fatalf("expired entry served at %v", lvl)
	}
	// An entry already expired is not stored.
	a.Put(other, entry(clk.t))
	if _, lvl := a.Get(ctx, other); lvl != Miss {
		t.Fatal("an expired entry was stored")
	}
	st := b.Stats()
	if st.Hits[L1] != 1 || st.Hits[L2] != 1 || st.Hits[Miss] != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestRedisDown: with Redis unreachable or its client closed, the cache
// keeps answering from L1, misses fast, and backs off the L2.
func TestRedisDown(t *testing.T) {
	closed := redisclient.Open(redistest.Addr(), redistest.NewPrefix(t))
	closed.Close()
	for name, r := range map[string]*redisclient.Client{
		"unreachable": redisclient.Open("127.0.0.1:1", "x:"),
		"closed":      closed,
	} {
		c := New(Options{Redis: r, RedisTimeout: 100 * time.Millisecond, Backoff: time.Hour})
		ctx := context.Background()
		k := Key{Tenant: "tenant-a", ToolID: "s.x"}
		start := time.Now()
		if _, lvl := c.Get(ctx, k); lvl != Miss {
			t.Fatalf("%s: %v", name, lvl)
		}
		for range 100 {
			c.Get(ctx, Key{Tenant: "tenant-a", ToolID: "s.y"})
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("%s: 101 misses took %v: the back-off did not hold", name, d)
		}
		if c.Stats().L2Errors != 1 {
			t.Fatalf("%s: %d L2 errors, want 1 then back-off", name, c.Stats().L2Errors)
		}
		c.Put(k, entry(time.Now().Add(time.Minute)))
		if _, lvl := c.Get(ctx, k); lvl != L1 {
			t.Fatalf("%s: L1 did not keep working: %v", name, lvl)
		}
		c.Close()
		r.Close()
	}
}

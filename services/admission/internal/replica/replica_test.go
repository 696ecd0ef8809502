package replica

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/services/admission/internal/decision"
)

func TestHeadsFreshness(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	h := NewHeads(5*time.Second, func() time.Time { return now })
	if !h.FreshUntil().IsZero() {
		t.Fatal("fresh before any heartbeat")
	}
	h.Heartbeat(RegistryStream)
	if ok, _ := h.Fresh(); ok || !h.FreshUntil().IsZero() {
		t.Fatal("fresh with only one stream caught up")
	}
	h.Heartbeat(DiscoveryStream)
	now = now.Add(2 * time.Second)
	h.Heartbeat(RegistryStream)
	if got := h.FreshUntil(); !got.Equal(now.Add(3 * time.Second)) {
		t.Fatalf("fresh until %v: the older stream bounds it", got)
	}
	now = now.Add(3 * time.Second)
	if ok, why := h.Fresh(); ok || why != "discovery Watch sent no heartbeat within the validity window" {
		t.Fatalf("%v %q", ok, why)
	}
}

func TestHeadsOnlyMoveForward(t *testing.T) {
	h := NewHeads(time.Second, nil)
	h.SetEpoch("t", 5)
	h.SetEpoch("t", 3)
	if e, _ := h.Epoch("t"); e != 5 {
		t.Fatalf("epoch went back to %d", e)
	}
	h.SetPointer(Pointer{ServerID: "s", Class: "t.c", Generation: 8, Revision: 10})
	h.SetPointer(Pointer{ServerID: "s", Class: "t.c", Generation: 7, Revision: 9}) // a late lazy read
	if p, _ := h.Pointer("s", "t.c"); p.Generation != 8 {
		t.Fatalf("an older head replaced a newer one: %+v", p)
	}
}

type countingPolicies struct {
	mu sync.Mutex
	n  int
}

func (c *countingPolicies) PolicyAt(_ context.Context, tenant string, epoch int64) (Policy, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	time.Sleep(10 * time.Millisecond)
	return Policy{Tenant: tenant, Epoch: epoch, Grants: []decision.Grant{{Subject: "a"}}}, nil
}

func (c *countingPolicies) Current(ctx context.Context, tenant string) (Policy, error) {
	return c.PolicyAt(ctx, tenant, 9)
}

func TestMaterialFetchesOncePerKey(t *testing.T) {
	src := &countingPolicies{}
	m := NewMaterial(src, nil, nil, 100)
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = m.PolicyAt(context.Background(), "t", 4) }()
	}
	wg.Wait()
	if _, err := m.PolicyAt(context.Background(), "t", 4); err != nil || src.n != 1 {
		t.Fatalf("%d fetches for one (tenant, epoch): %v", src.n, err)
	}
	if p, _ := m.Current(context.Background(), "t"); p.Epoch != 9 {
		t.Fatal(p)
	}
	if _, _ = m.PolicyAt(context.Background(), "t", 9); src.n != 2 {
		t.Fatalf("the current policy was not remembered under its epoch (%d fetches)", src.n)
	}
}

type goneAfter struct {
	countingPolicies
	kept int64
}

func (g *goneAfter) PolicyAt(ctx context.Context, tenant string, epoch int64) (Policy, error) {
	g.mu.Lock()
	g.n++
	g.mu.Unlock()
	if epoch < g.kept {
		return Policy{}, ErrNotKept
	}
	return Policy{Tenant: tenant, Epoch: epoch}, nil
}

// TestNotKeptIsRemembered: a plan at an epoch the registry no longer holds
// costs one read, not one per Check.
func TestNotKeptIsRemembered(t *testing.T) {
	src := &goneAfter{kept: 5}
	m := NewMaterial(src, nil, nil, 100)
	for range 10 {
		if _, err := m.PolicyAt(context.Background(), "t", 3); err != ErrNotKept {
			t.Fatal(err)
		}
	}
	if src.n != 1 {
		t.Fatalf("%d reads for one epoch that is not kept", src.n)
	}
}

// TestHeadsReadFollowersFreshness: once a stream follows a follower, its
// newest heartbeat is the follower's Freshness().At, not Heartbeat calls.
func TestHeadsReadFollowersFreshness(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	h := NewHeads(time.Second, func() time.Time { return now })
	var reg, disc changelog.Freshness
	h.Follow(RegistryStream, func() changelog.Freshness { return reg })
	h.Follow(DiscoveryStream, func() changelog.Freshness { return disc })
	h.Heartbeat(RegistryStream) // ignored: the follower is the source
	h.Heartbeat(DiscoveryStream)
	if ok, why := h.Fresh(); ok || why != "registry Watch has not caught up yet" {
		t.Fatalf("fresh before any follower heartbeat: %v %q", ok, why)
	}
	reg.At, disc.At = now.Add(-300*time.Millisecond), now.Add(-100*time.Millisecond)
	if ok, _ := h.Fresh(); !ok || !h.FreshUntil().Equal(reg.At.Add(time.Second)) || !h.Beat(DiscoveryStream).Equal(disc.At) {
		t.Fatalf("fresh %v until %v", ok, h.FreshUntil())
	}
	now = now.Add(700 * time.Millisecond) // registry's heartbeat is exactly one window old
	if ok, why := h.Fresh(); ok || why != "registry Watch sent no heartbeat within the validity window" {
		t.Fatalf("%v %q", ok, why)
	}
}

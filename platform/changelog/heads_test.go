package changelog

import (
	"testing"
	"time"
)

// TestFreshnessBoundary pins the one freshness comparison (I8): a
// heartbeat younger than the window is fresh, one exactly the window old
// is stale (fail closed), and so are older ones and none at all.
func TestFreshnessBoundary(t *testing.T) {
	const window = 5 * time.Second
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		age  time.Duration
		want bool
	}{{0, true}, {window - time.Nanosecond, true}, {window, false}, {window + time.Nanosecond, false}, {-time.Second, true}} {
		if got := (Freshness{At: at}).Fresh(at.Add(c.age), window); got != c.want {
			t.Errorf("heartbeat %v old: fresh %v, want %v", c.age, got, c.want)
		}
	}
	if (Freshness{}).Fresh(at, window) {
		t.Error("fresh without any heartbeat")
	}
}

// TestHeadsFreshAtTheBoundary: the heads are fresh exactly while now is
// before FreshUntil, the older stream bounds it, and the stream behind is
// named.
func TestHeadsFreshAtTheBoundary(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	h := NewHeads(5*time.Second, func() time.Time { return now })
	if ok, why := h.Fresh(); ok || why != "registry Watch has not caught up yet" || !h.FreshUntil().IsZero() {
		t.Fatalf("no heartbeat: %v %q until %v", ok, why, h.FreshUntil())
	}
	h.Heartbeat(RegistryHead)
	if ok, why := h.Fresh(); ok || why != "discovery Watch has not caught up yet" || !h.FreshUntil().IsZero() {
		t.Fatalf("one stream caught up: %v %q", ok, why)
	}
	h.Heartbeat(DiscoveryHead)
	now = now.Add(2 * time.Second)
	h.Heartbeat(RegistryHead)
	if got, want := h.FreshUntil(), now.Add(3*time.Second); !got.Equal(want) {
		t.Fatalf("fresh until %v, want %v (the older stream bounds it)", got, want)
	}
	now = now.Add(3*time.Second - time.Nanosecond)
	if ok, why := h.Fresh(); !ok {
		t.Fatalf("a nanosecond before the bound: %q", why)
	}
	now = now.Add(time.Nanosecond) // discovery's heartbeat is exactly one window old
	if ok, why := h.Fresh(); ok || why != "discovery Watch sent no heartbeat within the validity window" {
		t.Fatalf("at the bound: %v %q", ok, why)
	}
}

// TestHeadsReadFollowersFreshness: once a stream follows a follower, its
// newest heartbeat is the follower's Freshness().At, not Heartbeat calls.
func TestHeadsReadFollowersFreshness(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	h := NewHeads(time.Second, func() time.Time { return now })
	var reg, disc Freshness
	h.Follow(RegistryHead, func() Freshness { return reg })
	h.Follow(DiscoveryHead, func() Freshness { return disc })
	h.Heartbeat(RegistryHead) // ignored: the follower is the source
	h.Heartbeat(DiscoveryHead)
	if ok, why := h.Fresh(); ok || why != "registry Watch has not caught up yet" {
		t.Fatalf("fresh before any follower heartbeat: %v %q", ok, why)
	}
	reg.At, disc.At = now.Add(-300*time.Millisecond), now.Add(-100*time.Millisecond)
	if ok, _ := h.Fresh(); !ok || !h.FreshUntil().Equal(reg.At.Add(time.Second)) || !h.Beat(DiscoveryHead).Equal(disc.At) {
		t.Fatalf("fresh %v until %v", ok, h.FreshUntil())
	}
	now = now.Add(700 * time.Millisecond) // registry's heartbeat is exactly one window old
	if ok, why := h.Fresh(); ok || why != "registry Watch sent no heartbeat within the validity window" {
		t.Fatalf("%v %q", ok, why)
	}
}

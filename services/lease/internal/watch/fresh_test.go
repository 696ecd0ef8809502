package watch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/services/lease/admissionview"
)

// TestHeartbeatOneWindowOldIsStale: the lease service and admission share
// one freshness rule (changelog.Heads, I8). A heartbeat exactly one window
// old is stale, so Check fails closed with ErrStale; a nanosecond younger
// is fresh (the lease view once held it fresh at the boundary).
func TestHeartbeatOneWindowOldIsStale(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	v := New(Options{Window: time.Second, Now: func() time.Time { return now }})
	reg := changelog.Freshness{At: now}
	disc := changelog.Freshness{At: now.Add(-100 * time.Millisecond)}
	v.heads.Follow(changelog.RegistryHead, func() changelog.Freshness { return reg })
	v.heads.Follow(changelog.DiscoveryHead, func() changelog.Freshness { return disc })

	now = now.Add(900*time.Millisecond - time.Nanosecond)
	if ok, why := v.Fresh(); !ok {
		t.Fatalf("a nanosecond inside the window: %q", why)
	}
	now = now.Add(time.Nanosecond) // discovery's heartbeat is exactly one window old
	if ok, why := v.Fresh(); ok || why != "discovery Watch sent no heartbeat within the validity window" {
		t.Fatalf("at the window: %v %q", ok, why)
	}
	b := admissionview.Binding{Tenant: "acme", Server: "inventory", AudienceClass: "acme.readers", Tool: "inventory.reserve",
		DescriptorDigest: "sha256:d", Generation: 1, PolicyEpoch: 1}
	if _, err := v.Check(context.Background(), b); !errors.Is(err, admissionview.ErrStale) {
		t.Fatalf("Check at the window: %v, want ErrStale", err)
	}
}

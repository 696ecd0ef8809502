package incident

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/revision/lease"
	"github.com/toolcrib/toolcrib/services/lease/internal/watch"
)

type revoked map[string]bool // subjects whose leases match

func (r revoked) RevokedBefore(_, subject string, _ int64, _ time.Time, _ time.Duration) (watch.Revocation, bool) {
	return watch.Revocation{Epoch: 9}, r[subject]
}

type reporter struct {
	mu    sync.Mutex
	fails int // answer UNAVAILABLE this many times first
	got   []*discoveryv1.ReportIncidentRequest
}

func (r *reporter) ReportIncident(_ context.Context, in *discoveryv1.ReportIncidentRequest) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fails > 0 {
		r.fails--
		return status.Error(codes.Unavailable, "down")
	}
	r.got = append(r.got, in)
	return nil
}

func (r *reporter) reports() []*discoveryv1.ReportIncidentRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*discoveryv1.ReportIncidentRequest(nil), r.got...)
}

// TestDetectorReportsEachLeaseOnce: a matching lease is reported once
// (however often it is presented), under `lease-after-revoke:<id>`, with
// its server, class, generation and tenant, after discovery was
// unavailable twice; a lease that does not match is not reported.
func TestDetectorReportsEachLeaseOnce(t *testing.T) {
	rep := &reporter{fails: 2}
	found := 0
	d := New(Options{Revocations: revoked{"carol": true}, Reporter: rep, Found: func() { found++ }})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = d.Run(ctx) }()
	bad := lease.Claims{ID: "L1", Subject: "carol", Tenant: "tenant-a", Tool: "inventory.x", Server: "inventory",
		AudienceClass: "tenant-a.readers", Generation: 2, PolicyEpoch: 8, IssuedAt: time.Now()}
	d.Observe(ctx, bad)
	d.Observe(ctx, bad)
	d.Observe(ctx, lease.Claims{ID: "L2", Subject: "alice", Tenant: "tenant-a", Server: "inventory", AudienceClass: "tenant-a.readers"})
	deadline := time.Now().Add(5 * time.Second)
	for len(rep.reports()) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	got := rep.reports()
	if len(got) != 1 || found != 1 {
		t.Fatalf("reports %v, found %d", got, found)
	}
	r := got[0]
	if r.GetEventId() != EventPrefix+"L1" || r.GetKind() != discoveryv1.IncidentKind_INCIDENT_KIND_LEASE_AFTER_REVOKE ||
		r.GetServerId() != "inventory" || r.GetAudienceClass() != "tenant-a.readers" || r.GetGeneration() != 2 ||
		r.GetTenantId() != "tenant-a" || r.GetDetail() == "" {
		t.Fatalf("report %v", r)
	}
}

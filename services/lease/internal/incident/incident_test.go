package incident

import (
	"context"
	"testing"
	"time"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/revision/lease"
	"github.com/toolcrib/toolcrib/services/lease/internal/watch"
)

type revoked map[string]bool // subjects whose leases match

func (r revoked) RevokedBefore(_, subject string, _ int64, _ time.Time, _ time.Duration) (watch.Revocation, bool) {
	return watch.Revocation{Epoch: 9}, r[subject]
}

type queue []*discoveryv1.ReportIncidentRequest

func (q *queue) Report(req *discoveryv1.ReportIncidentRequest) { *q = append(*q, req) }

// TestDetectorReportsEachLeaseOnce: a matching lease is reported once
// (however often it is presented), under `lease-after-revoke:<id>`, with
// its server, class, generation and tenant; a lease that does not match is
// not reported.
func TestDetectorReportsEachLeaseOnce(t *testing.T) {
	var q queue
	found := 0
	d := New(Options{Revocations: revoked{"carol": true}, Reporter: &q, Found: func() { found++ }})
	ctx := context.Background()
	bad := lease.Claims{ID: "L1", Subject: "carol", Tenant: "tenant-a", Tool: "inventory.x", Server: "inventory",
		AudienceClass: "tenant-a.readers", Generation: 2, PolicyEpoch: 8, IssuedAt: time.Now()}
	d.Observe(ctx, bad)
	d.Observe(ctx, bad)
	d.Observe(ctx, lease.Claims{ID: "L2", Subject: "alice", Tenant: "tenant-a", Server: "inventory", AudienceClass: "tenant-a.readers"})
	if len(q) != 1 || found != 1 {
		t.Fatalf("reports %v, found %d", q, found)
	}
	r := q[0]
	if r.GetEventId() != EventPrefix+"L1" || r.GetKind() != discoveryv1.IncidentKind_INCIDENT_KIND_LEASE_AFTER_REVOKE ||
		r.GetServerId() != "inventory" || r.GetAudienceClass() != "tenant-a.readers" || r.GetGeneration() != 2 ||
		r.GetTenantId() != "tenant-a" || r.GetDetail() == "" {
		t.Fatalf("report %v", r)
	}
}

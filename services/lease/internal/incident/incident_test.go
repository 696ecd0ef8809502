package incident

import (
	"context"
	"fmt"
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

// TestDetectorRemembersTheNewestLeases: past maxSeen reported leases the
// least recently presented one is forgotten (and would be reported again),
// not every one: a lease still being presented is reported once.
func TestDetectorRemembersTheNewestLeases(t *testing.T) {
	var q queue
	d := New(Options{Revocations: revoked{"carol": true}, Reporter: &q})
	ctx := context.Background()
	claims := func(id string) lease.Claims {
		return lease.Claims{ID: id, Subject: "carol", Tenant: "tenant-a", Server: "inventory", AudienceClass: "tenant-a.readers", IssuedAt: time.Now()}
	}
	d.Observe(ctx, claims("first"))
	d.Observe(ctx, claims("hot"))
	for i := range maxSeen {
		d.Observe(ctx, claims(fmt.Sprintf("L%d", i)))
		if i%1000 == 0 {
			d.Observe(ctx, claims("hot"))
		}
	}
	if n := d.seen.Len(); n != maxSeen {
		t.Fatalf("%d leases remembered, want the bound %d", n, maxSeen)
	}
	reports := func(id string) (n int) {
		for _, r := range q {
			if r.GetEventId() == EventPrefix+id {
				n++
			}
		}
		return n
	}
	d.Observe(ctx, claims("hot"))
	d.Observe(ctx, claims("first"))
	if reports("hot") != 1 || reports("first") != 2 {
		t.Fatalf("reports: hot %d (want 1), first %d (want 2: forgotten past the bound)", reports("hot"), reports("first"))
	}
}

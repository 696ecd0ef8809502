package grpcapi

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/platform/redistest"
	"github.com/toolcrib/toolcrib/services/admission/internal/decision"
)

type incidents struct {
	mu  sync.Mutex
	got []*discoveryv1.ReportIncidentRequest
}

func (i *incidents) Report(req *discoveryv1.ReportIncidentRequest) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.got = append(i.got, req)
}

func (i *incidents) reports() []*discoveryv1.ReportIncidentRequest {
	i.mu.Lock()
	defer i.mu.Unlock()
	return append([]*discoveryv1.ReportIncidentRequest(nil), i.got...)
}

// TestTamperedCachedAllowIsReported: replica A decides a Check UNREVIEWED
// (the tool's digest is not approved) and caches it in Redis; the Redis
// entry is rewritten to ALLOW; replica B (the same Redis, its own memory)
// answers ALLOW from it, and its auditor, re-deciding from direct reads at
// the same epoch and generation, gets UNREVIEWED and reports one
// ALLOW_DENIED_ON_RECHECK incident for the receipt. A genuine cached ALLOW
// re-checked is not reported.
func TestTamperedCachedAllowIsReported(t *testing.T) {
	redis := redistest.NewClient(t)
	src := world()
	src.reviews["logistics.shipment_status@"+digA] = decision.Review{Known: true, Enabled: true} // not approved
	a := newRig(t, src, redis)
	if got := check(t, a.client(t, "alice", "demo-a"), okReq()).GetReason(); got != decision.Unreviewed {
		t.Fatalf("replica A: %v", got)
	}
	ctx := context.Background()
	var keys []string
	deadline := time.Now().Add(5 * time.Second)
	for len(keys) == 0 && time.Now().Before(deadline) {
		var err error
		if keys, err = redis.Keys(ctx, redis.Prefix()+"*").Result(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(keys) != 1 {
		t.Fatalf("decision cache keys in Redis: %v", keys)
	}
	raw, err := redis.Get(ctx, keys[0]).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	var entry map[string]any
	if err := json.Unmarshal(raw, &entry); err != nil {
		t.Fatal(err)
	}
	entry["r"], entry["d"] = int(decision.Allow), ""
	forged, _ := json.Marshal(entry)
	if err := redis.Set(ctx, keys[0], forged, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}

	inc := &incidents{}
	b := newRigWith(t, src, redis, func(o *Options) { o.AuditRate, o.Incidents = 1, inc })
	resp := check(t, b.client(t, "alice", "demo-a"), okReq())
	if resp.GetReason() != decision.Allow {
		t.Fatalf("replica B from the forged entry: %v", resp.GetReason())
	}
	deadline = time.Now().Add(5 * time.Second)
	for len(inc.reports()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	got := inc.reports()
	if len(got) != 1 {
		t.Fatalf("incidents: %v", got)
	}
	r := got[0]
	if r.GetEventId() != RecheckEventPrefix+resp.GetReceipt().GetReceiptId() || r.GetKind() != discoveryv1.IncidentKind_INCIDENT_KIND_ALLOW_DENIED_ON_RECHECK ||
		r.GetServerId() != "logistics" || r.GetAudienceClass() != "demo-a.readers" || r.GetGeneration() != 7 || r.GetTenantId() != "demo-a" {
		t.Fatalf("incident %v", r)
	}

	// A genuine ALLOW, from B's memory and re-checked, is not reported.
	src.mu.Lock()
	src.reviews["logistics.shipment_status@"+digA] = world().reviews["logistics.shipment_status@"+digA]
	src.mu.Unlock()
	inc2 := &incidents{}
	var mu sync.Mutex
	audited := map[bool]int{}
	c := newRigWith(t, src, redistest.NewClient(t), func(o *Options) {
		o.AuditRate, o.Incidents = 1, inc2
		o.Audited = func(denied bool) { mu.Lock(); audited[denied]++; mu.Unlock() }
	})
	for range 3 {
		if got := check(t, c.client(t, "alice", "demo-a"), okReq()).GetReason(); got != decision.Allow {
			t.Fatalf("genuine: %v", got)
		}
	}
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if got := inc2.reports(); len(got) != 0 || audited[false] != 2 || audited[true] != 0 {
		t.Fatalf("genuine cached ALLOWs: reports %v, re-checks %v (want 2, none denied)", got, audited)
	}
}

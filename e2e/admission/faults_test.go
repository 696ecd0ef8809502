package admission

import (
	"context"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/services/discovery"
)

const (
	staleSchema  = catalogv1.DecisionReason_DECISION_REASON_STALE_SCHEMA
	staleCatalog = catalogv1.DecisionReason_DECISION_REASON_STALE_CATALOG
)

// scan triggers a scan of the world's server and waits until the pointer
// is ACTIVE at generation; it returns the active snapshot's digests.
func (w *world) scan(t *testing.T, generation int64) map[string]string {
	t.Helper()
	ctx := ctxFor(t)
	if _, err := w.st.Discovery.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: serverID, AudienceClass: classA}); err != nil {
		t.Fatal(err)
	}
	key := discovery.PointerKey{ServerID: serverID, AudienceClass: classA}
	if _, err := discovery.WaitPointers(ctx, w.st.Discovery, 0, []discovery.PointerKey{key}, func(p *discoveryv1.ActivePointer) bool {
		return p.GetState() == discoveryv1.PointerState_POINTER_STATE_ACTIVE && p.GetGeneration() == generation
	}); err != nil {
		t.Fatalf("generation %d never active: %v", generation, err)
	}
	active, err := w.st.Discovery.GetActiveSnapshot(ctx, &discoveryv1.GetActiveSnapshotRequest{ServerId: serverID, AudienceClass: classA})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range active.GetSnapshot().GetTools() {
		out[d.GetToolId()] = d.GetDescriptorDigest()
	}
	return out
}

// checkTool asks for tool as planned at (generation, digest, epoch).
func checkTool(ctx context.Context, c admissionv1.AdmissionServiceClient, tool string, generation int64, digest string, epoch int64) (*admissionv1.CheckResponse, error) {
	return c.Check(ctx, &admissionv1.CheckRequest{ToolId: tool, Generation: generation, DescriptorDigest: digest,
		PolicyEpoch: epoch, Arguments: []byte(`{"shipment_id":"s-1"}`), Mode: admissionv1.Mode_MODE_AUTONOMOUS})
}

// TestLatePlannerAfterTwoGenerationsAndThreeEpochs: a plan made at
// generation N and epoch E calls after generation N+2 is active and the
// tenant's epoch is past E+3, through a replica that followed every step:
// the unchanged tool is ALLOW (N is compatible), the tool whose descriptor
// changed (and whose new descriptor was approved) is STALE_SCHEMA, the tool
// removed at the source is STALE_CATALOG, and the tool whose scope was
// revoked after E is POLICY_REVOKED; planned at the current generation and
// epoch the same four are ALLOW, ALLOW, NOT_FOUND and FORBIDDEN.
func TestLatePlannerAfterTwoGenerationsAndThreeEpochs(t *testing.T) {
	ctx := ctxFor(t)
	changed := extraTool{name: "cancel_shipment", description: "Cancel a shipment that has not left.", scope: scope}
	removed := extraTool{name: "reserve_slot", description: "Reserve a loading slot.", scope: scope}
	revoked := extraTool{name: "audit_log", description: "Read the audit log of a shipment.", scope: "audit:read"}
	w := newWorldWith(t, worldOptions{tools: []extraTool{changed, removed, revoked}})
	id := func(e extraTool) string { return serverID + "." + e.name }
	rep := w.startReplica(t, 5*time.Second)
	alice := w.client(t, rep, "alice", tenantA)
	n, e := w.generation, w.epoch(t)
	plan := map[string]string{toolID: w.digest}
	for _, x := range []extraTool{changed, removed, revoked} {
		plan[id(x)] = w.digests[id(x)]
	}
	for tool, d := range plan {
		if resp, err := checkTool(ctx, alice, tool, n, d, e); err != nil || resp.GetReason() != allow {
			t.Fatalf("%s at N=%d E=%d before any change: %v %v", tool, n, e, resp.GetReason(), err)
		}
	}

	// N+1: one tool's description changes (the owner approves the new
	// descriptor), one is removed at the source.
	if _, err := w.srv.Apply(fixture.Upsert(extraTool{name: changed.name, description: "Cancel a shipment and refund it.", scope: scope}.raw()), fixture.Remove(removed.name)); err != nil {
		t.Fatal(err)
	}
	next := w.scan(t, n+1)
	if next[id(changed)] == plan[id(changed)] || next[id(removed)] != "" {
		t.Fatalf("generation %d: %v", n+1, next)
	}
	w.digests[id(changed)] = next[id(changed)]
	w.approveVariant(t, id(changed), next[id(changed)])
	// N+2: a new tool; the others unchanged.
	if _, err := w.srv.Apply(fixture.Upsert(extraTool{name: "label", description: "Print a label.", scope: scope}.raw())); err != nil {
		t.Fatal(err)
	}
	last := w.scan(t, n+2)
	if last[toolID] != w.digest || last[id(changed)] != next[id(changed)] {
		t.Fatalf("generation %d: %v", n+2, last)
	}
	// Epochs: the audit scope revoked, then two more policy changes.
	reg := w.st.Registry
	if _, err := reg.RevokeScopes(ctx, &registryv1.RevokeScopesRequest{TenantId: tenantA, Subject: "alice", Scopes: []string{revoked.scope}}); err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"auditors", "drivers"} {
		if _, err := reg.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenantA, Group: g, Scopes: []string{scope}, AudienceClasses: []string{classA}}); err != nil {
			t.Fatal(err)
		}
	}
	now := w.epoch(t)
	if now < e+3 {
		t.Fatalf("epoch %d, want at least E+3 = %d", now, e+3)
	}
	// The replica has followed: it answers at N+2 and the current epoch.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := checkTool(ctx, alice, toolID, n+2, w.digest, now)
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetCurrentGeneration() == n+2 && resp.GetCurrentPolicyEpoch() == now {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica never reached N+2/E%d: %d/%d", now, resp.GetCurrentGeneration(), resp.GetCurrentPolicyEpoch())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, c := range []struct {
		tool   string
		gen    int64
		digest string
		epoch  int64
		want   catalogv1.DecisionReason
		what   string
	}{
		{toolID, n, plan[toolID], e, allow, "unchanged tool, plan N/E"},
		{id(changed), n, plan[id(changed)], e, staleSchema, "changed tool, plan N/E"},
		{id(removed), n, plan[id(removed)], e, staleCatalog, "removed tool, plan N/E"},
		{id(revoked), n, plan[id(revoked)], e, policyRevoked, "revoked scope, plan N/E"},
		{toolID, n + 2, w.digest, now, allow, "unchanged tool, plan N+2/now"},
		{id(changed), n + 2, next[id(changed)], now, allow, "changed tool, new digest, plan N+2/now"},
		{id(removed), n + 2, plan[id(removed)], now, notFound, "removed tool, plan N+2/now"},
		{id(revoked), n + 2, plan[id(revoked)], now, forbidden, "revoked scope, plan N+2/now"},
	} {
		resp, err := checkTool(ctx, alice, c.tool, c.gen, c.digest, c.epoch)
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetReason() != c.want || resp.GetReceipt().GetGeneration() != n+2 || resp.GetReceipt().GetPolicyEpoch() != now {
			t.Errorf("%s: %v %q (receipt generation %d epoch %d), want %v at %d/%d", c.what, resp.GetReason(), resp.GetDetail(),
				resp.GetReceipt().GetGeneration(), resp.GetReceipt().GetPolicyEpoch(), c.want, n+2, now)
		}
	}
}

// approveVariant approves the class's variant of tool at digest under its
// current contract, once the registry has learned that digest.
func (w *world) approveVariant(t *testing.T, tool, digest string) {
	t.Helper()
	ctx := ctxFor(t)
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := w.st.Registry.GetTool(ctx, &registryv1.GetToolRequest{ToolId: tool})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range resp.GetTool().GetVariants() {
			if v.GetAudienceClass() == classA && v.GetDescriptorDigest() == digest && v.GetApprovalDigest() != "" {
				if _, err := w.st.Registry.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: tool, ApprovalDigest: v.GetApprovalDigest()}); err != nil {
					t.Fatal(err)
				}
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the registry did not learn %s at %s", tool, digest)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// activePointer returns the world's pointer.
func (w *world) activePointer(t *testing.T) *discoveryv1.ActivePointer {
	t.Helper()
	active, err := w.st.Discovery.GetActiveSnapshot(ctxFor(t), &discoveryv1.GetActiveSnapshotRequest{ServerId: serverID, AudienceClass: classA})
	if err != nil {
		t.Fatal(err)
	}
	return active.GetPointer()
}

// TestRefreshFailingPastFreshUntilStopsTheGeneration: snapshots prove their
// catalog for 4 s here. The MCP server becomes unreachable (its link
// severed) and a rescan fails; once the pointer's fresh_until passes, the
// generation serves nothing: STALE_CATALOG, never ALLOW, on a replica with
// the decision cached. When the server is reachable again a proven rescan
// (same revision: no new generation) moves fresh_until and the same
// generation serves again.
func TestRefreshFailingPastFreshUntilStopsTheGeneration(t *testing.T) {
	ctx := ctxFor(t)
	const ttl = 4 * time.Second
	w := newWorldWith(t, worldOptions{sourceLink: true, discovery: func(c *discovery.Config) { c.SnapshotTTL = ttl }})
	rep := w.startReplica(t, 5*time.Second)
	alice := w.client(t, rep, "alice", tenantA)
	// Start from a fresh proof: setup may have used part of the first.
	before := w.activePointer(t)
	w.refresh(t, before)
	epoch := w.epoch(t)
	w.requireAllow(t, ctx, alice, epoch) // cached from here on

	w.sourceLink.Sever()
	ptr := w.activePointer(t)
	freshUntil := ptr.GetFreshUntil().AsTime()
	_, err := w.st.Discovery.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: serverID, AudienceClass: classA})
	if err != nil {
		t.Fatal(err)
	}
	var stale time.Time
	pastFresh := 0
	for time.Now().Before(freshUntil.Add(1500 * time.Millisecond)) {
		resp, err := w.check(ctx, alice, epoch, "")
		if err != nil {
			t.Fatal(err)
		}
		at := resp.GetReceipt().GetDecidedAt().AsTime()
		switch resp.GetReason() {
		case allow:
			if !at.Before(freshUntil) {
				pastFresh++
			}
			if !stale.IsZero() {
				t.Fatalf("ALLOW at %v after STALE_CATALOG", at)
			}
		case staleCatalog:
			if stale.IsZero() {
				stale = at
			}
		default:
			t.Fatalf("while refreshes fail: %v %q", resp.GetReason(), resp.GetDetail())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if pastFresh > 0 || stale.IsZero() || stale.Before(freshUntil) {
		t.Fatalf("fresh_until %v: %d ALLOW past it, first STALE_CATALOG %v", freshUntil, pastFresh, stale)
	}
	if p := w.activePointer(t); !p.GetFreshUntil().AsTime().Equal(freshUntil) || p.GetGeneration() != w.generation {
		t.Fatalf("a rescan of an unreachable server moved the pointer: %v", p)
	}
	t.Logf("fresh_until passed at %v; first STALE_CATALOG %.0f ms later", freshUntil.Format(time.StampMilli),
		float64(stale.Sub(freshUntil).Microseconds())/1000)

	w.sourceLink.Heal()
	healed := w.activePointer(t)
	w.refresh(t, healed)
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := w.check(ctx, alice, epoch, "")
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetReason() == allow {
			break
		}
		if resp.GetReason() != staleCatalog || time.Now().After(deadline) {
			t.Fatalf("after a proven rescan: %v %q", resp.GetReason(), resp.GetDetail())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if p := w.activePointer(t); p.GetGeneration() != w.generation {
		t.Fatalf("the proven rescan of an unchanged catalog made generation %d", p.GetGeneration())
	}
	w.requireAllow(t, ctx, alice, epoch)
}

// refresh triggers a rescan and waits until it moved the pointer's
// fresh_until past from's.
func (w *world) refresh(t *testing.T, from *discoveryv1.ActivePointer) {
	t.Helper()
	ctx := ctxFor(t)
	if _, err := w.st.Discovery.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: serverID, AudienceClass: classA}); err != nil {
		t.Fatal(err)
	}
	key := discovery.PointerKey{ServerID: serverID, AudienceClass: classA}
	if _, err := discovery.WaitPointers(ctx, w.st.Discovery, from.GetRevision(), []discovery.PointerKey{key}, func(p *discoveryv1.ActivePointer) bool {
		return p.GetState() == discoveryv1.PointerState_POINTER_STATE_ACTIVE && p.GetFreshUntil().AsTime().After(from.GetFreshUntil().AsTime())
	}); err != nil {
		t.Fatalf("no proven refresh: %v", err)
	}
}

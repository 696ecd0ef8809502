package admission

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/canonical"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/discovery"
)

// wantToolDiff compares a ToolDiff with exact names (`name:compared` for
// changed tools) and counts.
func wantToolDiff(t *testing.T, what string, d *discoveryv1.ToolDiff, missing, extra, changed []string, same int32) {
	t.Helper()
	var ch []string
	for _, c := range d.GetChanged() {
		ch = append(ch, c.GetName()+":"+c.GetCompared())
	}
	if d == nil || !slices.Equal(d.GetMissing(), missing) || !slices.Equal(d.GetExtra(), extra) || !slices.Equal(ch, changed) ||
		d.GetSameCount() != same || int(d.GetMissingCount()) != len(missing) || int(d.GetExtraCount()) != len(extra) ||
		int(d.GetChangedCount()) != len(changed) || d.GetTruncated() {
		t.Fatalf("%s: %v\nwant missing %v, extra %v, changed %v, same %d", what, d, missing, extra, changed, same)
	}
}

// comparisonOf reads the comparison stored with the run that committed
// generation gen, checking it is that run's (ListGenerations) and that
// GetRun carries the same.
func (r *rolloutWorld) comparisonOf(t *testing.T, gen int64) *discoveryv1.RunComparison {
	t.Helper()
	resp, err := r.st.Discovery.GetRunComparison(r.ctx, &discoveryv1.GetRunComparisonRequest{ServerId: serverID, AudienceClass: classA, Generation: gen})
	if err != nil {
		t.Fatal(err)
	}
	c := resp.GetComparison()
	gens, err := r.st.Discovery.ListGenerations(r.ctx, &discoveryv1.ListGenerationsRequest{ServerId: serverID, AudienceClass: classA})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gens.GetGenerations() {
		if g.GetGeneration() == gen && g.GetRunId() != c.GetRunId() {
			t.Fatalf("generation %d was committed by run %s; the comparison is run %s's", gen, g.GetRunId(), c.GetRunId())
		}
	}
	run, err := r.st.Discovery.GetRun(r.ctx, &discoveryv1.GetRunRequest{RunId: c.GetRunId()})
	if err != nil {
		t.Fatal(err)
	}
	if got := run.GetRun().GetComparison(); got.GetRunId() != c.GetRunId() || got.GetAgainstStatic().String() != c.GetAgainstStatic().String() {
		t.Fatalf("GetRun's comparison %v, GetRunComparison's %v", got, c)
	}
	if c.GetGeneration() != gen || c.GetTenantId() != tenantA {
		t.Fatalf("comparison of generation %d: %v", gen, c)
	}
	return c
}

// shadowCheck asserts admission answers NOT_FOUND saying shadow, naming no
// generation or digest, for a plan at the current generation.
func (r *rolloutWorld) shadowCheck(t *testing.T, qs ...*admissionv1.CheckRequest) {
	t.Helper()
	for _, q := range qs {
		resp := r.check1(t, q)
		if resp.GetReason() != notFound || !strings.Contains(resp.GetDetail(), "in shadow") || resp.GetCurrentGeneration() != 0 ||
			resp.GetReceipt().GetGeneration() != 0 || resp.GetCurrentDescriptorDigest() != "" {
			t.Fatalf("shadow, %s at generation %d: %v %q (generation %d)", q.GetToolId(), q.GetGeneration(), resp.GetReason(),
				resp.GetDetail(), resp.GetCurrentGeneration())
		}
	}
	if got := r.listed(t, "run-0"); len(got) != 0 {
		t.Fatalf("shadow: listed %v", got)
	}
}

// TestShadowGenerationsAreComparedAndNeverAdmitted walks tenant-a's
// (inventory, readers) pair through shadow with a static tool list set by
// the server's owner through the real registry and discovery: two
// generations proven in shadow are stored, admission answers NOT_FOUND
// "in shadow" for both, and the comparison stored with each generation's
// run is exact — against the static list (a digest entry that matches, a
// schema entry that does not, a name-only entry the server lacks) and
// against the previous generation (a tool added, then a description
// changed). A tenant-b principal can neither read nor attach the list nor
// read a comparison.
func TestShadowGenerationsAreComparedAndNeverAdmitted(t *testing.T) {
	ctx := ctxFor(t)
	w := newWorld(t)
	r := &rolloutWorld{world: w, ctx: ctx}
	r.alice = w.confirmedClient(t, w.startReplica(t, 5*time.Second), "alice", tenantA)
	gen1 := r.generation

	// The owner (tenant-a's inventory-team, the registry's owner of the
	// server) attaches the list in use today.
	dial := func(subject, tenant string, groups ...string) discoveryv1.DiscoveryServiceClient {
		return discoveryv1.NewDiscoveryServiceClient(servicetest.Dial(t, w.st.DiscoveryAddr, w.st.Auth.User(t, subject, tenant, groups...)))
	}
	owner := dial("olga", tenantA, "inventory-team")
	labelSchema := []byte(`{"type":"object","properties":{"shipment_id":{"type":"integer"}},"required":["shipment_id"]}`)
	set, err := owner.SetStaticToolList(ctx, &discoveryv1.SetStaticToolListRequest{ServerId: serverID, AudienceClass: classA,
		Reason: "the tools in the agent's prompt today", Tools: []*discoveryv1.StaticTool{
			{Name: "shipment_status", DescriptorDigest: w.digest},
			{Name: "create_label", InputSchema: labelSchema},
			{Name: "legacy_lookup"},
		}})
	if err != nil {
		t.Fatal(err)
	}
	if set.GetList().GetVersion() != 1 || set.GetList().GetSetBy() != "olga" {
		t.Fatalf("set: %v", set.GetList())
	}

	// SHADOW; generation 2 (create_label added) is proven in shadow.
	r.moves(t, registryv1.Stage_STAGE_SHADOW, r.statusReq("run-0"), notFound, "in shadow")
	r.addLabelTool(t)
	gen2 := r.generation
	if gen2 <= gen1 {
		t.Fatalf("generation %d after %d", gen2, gen1)
	}
	r.shadowCheck(t, r.statusReq("run-0"), r.statusReq(""), r.labelReq("run-0"))
	c2 := r.comparisonOf(t, gen2)
	if c2.GetStaticListVersion() != 1 || c2.GetPreviousGeneration() != gen1 {
		t.Fatalf("generation %d: %v", gen2, c2)
	}
	labelInput, err := canonical.Digest([]byte(`{"type":"object","properties":{"shipment_id":{"type":"string"}},"required":["shipment_id"]}`))
	if err != nil {
		t.Fatal(err)
	}
	wantToolDiff(t, "generation 2 vs static", c2.GetAgainstStatic(), []string{"legacy_lookup"}, nil, []string{"create_label:input_schema_digest"}, 1)
	if ch := c2.GetAgainstStatic().GetChanged()[0]; ch.GetActualDigest() != labelInput {
		t.Fatalf("create_label's input schema digest %s, want %s", ch.GetActualDigest(), labelInput)
	}
	wantToolDiff(t, "generation 2 vs 1", c2.GetAgainstPrevious(), nil, []string{"create_label"}, nil, 1)

	// Generation 3: shipment_status's description changes at the source.
	from := r.pointerRevision(t)
	if _, err := r.srv.Apply(fixture.Upsert(statusTool("Query the status of a shipment and try to repair it."))); err != nil {
		t.Fatal(err)
	}
	if _, err := r.st.Discovery.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: serverID, AudienceClass: classA}); err != nil {
		t.Fatal(err)
	}
	key := discovery.PointerKey{ServerID: serverID, AudienceClass: classA}
	got, err := discovery.WaitPointers(ctx, r.st.Discovery, from, []discovery.PointerKey{key}, func(p *discoveryv1.ActivePointer) bool {
		return p.GetGeneration() > gen2
	})
	if err != nil {
		t.Fatal(err)
	}
	gen3 := got[key].GetGeneration()
	c3 := r.comparisonOf(t, gen3)
	if c3.GetPreviousGeneration() != gen2 {
		t.Fatalf("generation %d: %v", gen3, c3)
	}
	wantToolDiff(t, "generation 3 vs 2", c3.GetAgainstPrevious(), nil, nil, []string{"shipment_status:descriptor_digest"}, 1)
	ch := c3.GetAgainstPrevious().GetChanged()[0]
	if ch.GetExpectedDigest() != w.digest || ch.GetActualDigest() == w.digest || !canonical.ValidDigest(ch.GetActualDigest()) {
		t.Fatalf("shipment_status changed: %v (was %s)", ch, w.digest)
	}
	wantToolDiff(t, "generation 3 vs static", c3.GetAgainstStatic(), []string{"legacy_lookup"}, nil,
		[]string{"create_label:input_schema_digest", "shipment_status:descriptor_digest"}, 0)
	// Stored, and still never admitted: a plan at generation 3 with its digest.
	r.generation, r.digest = gen3, ch.GetActualDigest()
	r.shadowCheck(t, r.statusReq("run-0"), r.labelReq("run-0"))
	if _, err := r.st.Discovery.GetSnapshot(ctx, &discoveryv1.GetSnapshotRequest{ServerId: serverID, AudienceClass: classA, Generation: gen3}); err != nil {
		t.Fatalf("generation %d is not stored: %v", gen3, err)
	}

	// tenant-b: every read and the attach are NOT_FOUND, the list unchanged.
	bob := dial("bob", tenantB, "inventory-team", "readers")
	calls := map[string]error{}
	_, calls["GetStaticToolList"] = bob.GetStaticToolList(ctx, &discoveryv1.GetStaticToolListRequest{ServerId: serverID, AudienceClass: classA})
	_, calls["SetStaticToolList"] = bob.SetStaticToolList(ctx, &discoveryv1.SetStaticToolListRequest{ServerId: serverID, AudienceClass: classA,
		Tools: []*discoveryv1.StaticTool{{Name: "shipment_status"}}})
	_, calls["GetRunComparison by run"] = bob.GetRunComparison(ctx, &discoveryv1.GetRunComparisonRequest{RunId: c3.GetRunId()})
	_, calls["GetRunComparison by pair"] = bob.GetRunComparison(ctx, &discoveryv1.GetRunComparisonRequest{ServerId: serverID, AudienceClass: classA})
	for name, err := range calls {
		if status.Code(err) != codes.NotFound {
			t.Errorf("tenant-b %s: %v, want NOT_FOUND", name, err)
		}
	}
	if l, err := r.st.Discovery.GetStaticToolList(ctx, &discoveryv1.GetStaticToolListRequest{ServerId: serverID, AudienceClass: classA}); err != nil ||
		l.GetList().GetVersion() != 1 || l.GetList().GetSetBy() != "olga" {
		t.Fatalf("after tenant-b's attempts: %v %v", l, err)
	}
}

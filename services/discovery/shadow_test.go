package discovery_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/canonical"
	"github.com/toolcrib/toolcrib/services/discovery/discoverytest"
)

const shadowOwner = tenant + "/group:inventory-team"

// shadowEnv registers server "inventory" (owned by tenant-a's
// inventory-team) for tenant-a's class, its catalog served over HTTP.
func shadowEnv(t *testing.T, tools ...json.RawMessage) (*env, *discoverytest.Catalog) {
	t.Helper()
	e := start(t, nil)
	cat := discoverytest.NewCatalog("r-1", 2, tools...)
	srv := discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{}, false)
	e.reg.AddTenant(tenant)
	e.reg.PutServer(&registryv1.Server{ServerId: "inventory", Owner: shadowOwner, TrustLevel: registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY,
		RevisionSource: registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED, ScanInterval: durationpb.New(time.Hour),
		Transport: &registryv1.Server_StreamableHttp{StreamableHttp: &registryv1.StreamableHttpTransport{Url: srv.URL}}})
	e.bind(class, "inventory", "")
	return e, cat
}

func digestOf(t *testing.T, raw []byte) string {
	t.Helper()
	d, err := canonical.Digest(raw)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// wantDiff compares a ToolDiff with exact name lists and changed tools
// (`name:compared`).
func wantDiff(t *testing.T, what string, d *discoveryv1.ToolDiff, missing, extra, changed []string, same int32) {
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

// TestShadowComparisonIsStoredWithTheRun: the static list attached to a
// pair and the previous generation are compared with every committed
// generation, in the commit, exactly (names in missing, extra, changed;
// a name-only entry by presence, a digest entry by descriptor digest, a
// schema entry by the canonical digest of the schema); an UNCHANGED rescan
// compares again only when the static list changed since.
func TestShadowComparisonIsStoredWithTheRun(t *testing.T) {
	toolX1 := discoverytest.Tool("x_1")
	toolX2 := discoverytest.Tool("x_2")
	e, cat := shadowEnv(t, discoverytest.Tool("x_0"), toolX1, toolX2, discoverytest.Tool("fresh"))
	ctx := ctxT(t)
	otherSchema := []byte(`{ "type": "object", "properties": {"id": {"type": "integer"}} }`)
	set, err := e.admin.SetStaticToolList(ctx, &discoveryv1.SetStaticToolListRequest{ServerId: "inventory", AudienceClass: class,
		Reason: "the list in the agent's prompt today", Tools: []*discoveryv1.StaticTool{
			{Name: "x_0"}, {Name: "x_1", DescriptorDigest: digestOf(t, toolX1)}, {Name: "x_2", InputSchema: otherSchema}, {Name: "legacy_tool"},
		}})
	if err != nil {
		t.Fatal(err)
	}
	l := set.GetList()
	if l.GetVersion() != 1 || l.GetTenantId() != tenant || l.GetSetBy() == "" || l.GetReason() == "" || len(l.GetTools()) != 4 ||
		l.GetTools()[0].GetName() != "legacy_tool" || l.GetTools()[3].GetInputSchemaDigest() != digestOf(t, otherSchema) ||
		string(l.GetTools()[3].GetInputSchema()) != `{"properties":{"id":{"type":"integer"}},"type":"object"}` {
		t.Fatalf("stored list: %v", l)
	}
	got, err := e.admin.GetStaticToolList(ctx, &discoveryv1.GetStaticToolListRequest{ServerId: "inventory", AudienceClass: class})
	if err != nil || got.GetList().GetVersion() != 1 || len(got.GetList().GetTools()) != 4 {
		t.Fatalf("GetStaticToolList: %v %v", got, err)
	}

	// Generation 1 against the static list; no previous generation.
	r1 := e.scanAndWait("inventory", class)
	want(t, r1, eligible, 0)
	run1, err := e.admin.GetRun(ctx, &discoveryv1.GetRunRequest{RunId: r1.GetRunId()})
	if err != nil {
		t.Fatal(err)
	}
	c1 := run1.GetRun().GetComparison()
	if c1.GetGeneration() != 1 || c1.GetStaticListVersion() != 1 || c1.GetPreviousGeneration() != 0 || c1.GetAgainstPrevious() != nil ||
		c1.GetRunId() != r1.GetRunId() || c1.GetTenantId() != tenant {
		t.Fatalf("generation 1's comparison: %v", c1)
	}
	wantDiff(t, "generation 1 vs static", c1.GetAgainstStatic(), []string{"legacy_tool"}, []string{"fresh"}, []string{"x_2:input_schema_digest"}, 2)
	if ch := c1.GetAgainstStatic().GetChanged()[0]; ch.GetExpectedDigest() != digestOf(t, otherSchema) ||
		ch.GetActualDigest() != digestOf(t, []byte(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`)) {
		t.Fatalf("x_2 changed: %v", ch)
	}

	// Generation 2: x_0's description changes, x_1 goes, added comes.
	x0v2 := json.RawMessage(`{"name":"x_0","description":"Test tool x_0, now repairing too.","inputSchema":{"type":"object"}}`)
	cat.SetTools("r-2", x0v2, toolX2, discoverytest.Tool("fresh"), discoverytest.Tool("added"))
	r2 := e.scanAndWait("inventory", class)
	want(t, r2, eligible, 0)
	cmp2, err := e.admin.GetRunComparison(ctx, &discoveryv1.GetRunComparisonRequest{RunId: r2.GetRunId()})
	if err != nil {
		t.Fatal(err)
	}
	c2 := cmp2.GetComparison()
	if c2.GetGeneration() != 2 || c2.GetPreviousGeneration() != 1 || c2.GetStaticListVersion() != 1 || cmp2.GetCurrentStaticListVersion() != 1 {
		t.Fatalf("generation 2's comparison: %v", cmp2)
	}
	wantDiff(t, "generation 2 vs 1", c2.GetAgainstPrevious(), []string{"x_1"}, []string{"added"}, []string{"x_0:descriptor_digest"}, 2)
	if ch := c2.GetAgainstPrevious().GetChanged()[0]; ch.GetExpectedDigest() != digestOf(t, discoverytest.Tool("x_0")) || ch.GetActualDigest() != digestOf(t, x0v2) {
		t.Fatalf("x_0 changed: %v", ch)
	}
	wantDiff(t, "generation 2 vs static", c2.GetAgainstStatic(), []string{"legacy_tool", "x_1"}, []string{"added", "fresh"},
		[]string{"x_2:input_schema_digest"}, 1)

	// A new static list version; the next UNCHANGED rescan compares the
	// active generation with it (keeping the comparison with generation
	// 1), the one after stores nothing new.
	if _, err := e.admin.SetStaticToolList(ctx, &discoveryv1.SetStaticToolListRequest{ServerId: "inventory", AudienceClass: class,
		ExpectedVersion: 1, Tools: []*discoveryv1.StaticTool{{Name: "x_0"}, {Name: "x_2"}, {Name: "fresh"}, {Name: "added"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.SetStaticToolList(ctx, &discoveryv1.SetStaticToolListRequest{ServerId: "inventory", AudienceClass: class,
		ExpectedVersion: 1, Tools: []*discoveryv1.StaticTool{{Name: "x_0"}}}); status.Code(err) != codes.Aborted || reason(err) != "STATIC_LIST_MOVED" {
		t.Fatalf("a stale expected_version: %v", err)
	}
	stale, err := e.admin.GetRunComparison(ctx, &discoveryv1.GetRunComparisonRequest{ServerId: "inventory", AudienceClass: class})
	if err != nil || stale.GetComparison().GetRunId() != r2.GetRunId() || stale.GetCurrentStaticListVersion() != 2 {
		t.Fatalf("before the rescan: %v %v", stale, err)
	}
	r3 := e.scanAndWait("inventory", class)
	want(t, r3, proven, discoveryv1.RunReason_RUN_REASON_UNCHANGED)
	cmp3, err := e.admin.GetRunComparison(ctx, &discoveryv1.GetRunComparisonRequest{ServerId: "inventory", AudienceClass: class, Generation: 2})
	if err != nil {
		t.Fatal(err)
	}
	c3 := cmp3.GetComparison()
	if c3.GetRunId() != r3.GetRunId() || c3.GetGeneration() != 2 || c3.GetStaticListVersion() != 2 || c3.GetPreviousGeneration() != 1 {
		t.Fatalf("the UNCHANGED run's comparison: %v", c3)
	}
	wantDiff(t, "generation 2 vs static 2", c3.GetAgainstStatic(), nil, nil, nil, 4)
	wantDiff(t, "generation 2 vs 1, kept", c3.GetAgainstPrevious(), []string{"x_1"}, []string{"added"}, []string{"x_0:descriptor_digest"}, 2)
	r4 := e.scanAndWait("inventory", class)
	want(t, r4, proven, discoveryv1.RunReason_RUN_REASON_UNCHANGED)
	if run4, err := e.admin.GetRun(ctx, &discoveryv1.GetRunRequest{RunId: r4.GetRunId()}); err != nil || run4.GetRun().GetComparison() != nil {
		t.Fatalf("a rescan against the same static version: %v %v", run4.GetRun().GetComparison(), err)
	}
	if _, err := e.admin.GetRunComparison(ctx, &discoveryv1.GetRunComparisonRequest{RunId: r4.GetRunId()}); status.Code(err) != codes.NotFound {
		t.Fatalf("GetRunComparison of a run without one: %v", err)
	}
	// Generation 1's comparison is still the one of its commit.
	if g1, err := e.admin.GetRunComparison(ctx, &discoveryv1.GetRunComparisonRequest{ServerId: "inventory", AudienceClass: class, Generation: 1}); err != nil ||
		g1.GetComparison().GetRunId() != r1.GetRunId() {
		t.Fatalf("generation 1: %v %v", g1, err)
	}
}

// TestStaticToolListTenancy: a tenant-b principal can neither read nor
// attach tenant-a's static list, nor read its comparisons, and is answered
// exactly as for a pair that does not exist; in tenant-a the server's
// owner may set it, another member may only read it.
func TestStaticToolListTenancy(t *testing.T) {
	e, _ := shadowEnv(t, discoverytest.Tools("x", 2)...)
	ctx := ctxT(t)
	owner := e.client(e.auth.User(t, "olga", tenant, "inventory-team"))
	member := e.client(e.auth.User(t, "mia", tenant, "readers"))
	bob := e.client(e.auth.User(t, "bob", "tenant-b", "inventory-team", "readers"))
	setReq := &discoveryv1.SetStaticToolListRequest{ServerId: "inventory", AudienceClass: class, Tools: []*discoveryv1.StaticTool{{Name: "x_0"}, {Name: "gone"}}}
	getReq := &discoveryv1.GetStaticToolListRequest{ServerId: "inventory", AudienceClass: class}

	// Before anything exists, and after: bob's answers are the same.
	_, err := bob.GetStaticToolList(ctx, getReq)
	before := observe(t, nil, err)
	_, setErr := bob.SetStaticToolList(ctx, setReq)
	beforeSet := observe(t, nil, setErr)
	_, missErr := bob.SetStaticToolList(ctx, &discoveryv1.SetStaticToolListRequest{ServerId: "inventory", AudienceClass: "tenant-a.nobody"})
	if before.code != codes.NotFound || beforeSet.code != codes.NotFound || status.Code(missErr) != codes.NotFound {
		t.Fatalf("bob before: %v / %v / %v", before, beforeSet, missErr)
	}

	if _, err := member.SetStaticToolList(ctx, setReq); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a tenant-a member who does not own the server: %v", err)
	}
	set, err := owner.SetStaticToolList(ctx, setReq)
	if err != nil || set.GetList().GetSetBy() != "olga" {
		t.Fatalf("the owner: %v %v", set, err)
	}
	run := e.scanAndWait("inventory", class)
	want(t, run, eligible, 0)
	if got, err := member.GetStaticToolList(ctx, getReq); err != nil || got.GetList().GetVersion() != 1 {
		t.Fatalf("a tenant-a member reads: %v %v", got, err)
	}
	if got, err := member.GetRunComparison(ctx, &discoveryv1.GetRunComparisonRequest{RunId: run.GetRunId()}); err != nil ||
		!slices.Equal(got.GetComparison().GetAgainstStatic().GetMissing(), []string{"gone"}) {
		t.Fatalf("a tenant-a member reads the comparison: %v %v", got, err)
	}

	_, err = bob.GetStaticToolList(ctx, getReq)
	if after := observe(t, nil, err); !after.equal(before) {
		t.Fatalf("bob's read changed once the list existed: %v, was %v", after, before)
	}
	_, err = bob.SetStaticToolList(ctx, setReq)
	if after := observe(t, nil, err); !after.equal(beforeSet) {
		t.Fatalf("bob's attach changed once the list existed: %v, was %v", after, beforeSet)
	}
	_, byRun := bob.GetRunComparison(ctx, &discoveryv1.GetRunComparisonRequest{RunId: run.GetRunId()})
	_, neverRun := bob.GetRunComparison(ctx, &discoveryv1.GetRunComparisonRequest{RunId: "00000000-0000-4000-8000-000000000000"})
	if status.Code(byRun) != codes.NotFound || !strings.Contains(status.Convert(byRun).Message(), "run comparison") ||
		status.Code(neverRun) != codes.NotFound {
		t.Fatalf("bob reads a comparison: %v / %v", byRun, neverRun)
	}
	if _, err := bob.GetRunComparison(ctx, &discoveryv1.GetRunComparisonRequest{ServerId: "inventory", AudienceClass: class}); status.Code(err) != codes.NotFound {
		t.Fatalf("bob reads the pair's comparison: %v", err)
	}
	if got, err := e.admin.GetStaticToolList(ctx, getReq); err != nil || got.GetList().GetVersion() != 1 || got.GetList().GetSetBy() != "olga" {
		t.Fatalf("bob's attempts changed the list: %v %v", got, err)
	}
}

// TestStaticToolListRefusesBadInput: every malformed, oversized or
// ambiguous list is INVALID_ARGUMENT naming the field, and nothing is
// stored; an unknown pair is NOT_FOUND, a class not covering the server
// FAILED_PRECONDITION.
func TestStaticToolListRefusesBadInput(t *testing.T) {
	e, _ := shadowEnv(t, discoverytest.Tools("x", 1)...)
	ctx := ctxT(t)
	digest := fmt.Sprintf("sha256:%064x", 7)
	many := make([]*discoveryv1.StaticTool, 10_001)
	for i := range many {
		many[i] = &discoveryv1.StaticTool{Name: fmt.Sprintf("t_%d", i)}
	}
	bigSchema := []byte(`{"description":"` + strings.Repeat("a", 64<<10) + `"}`)
	var heavy []*discoveryv1.StaticTool
	for i := range 40 {
		heavy = append(heavy, &discoveryv1.StaticTool{Name: fmt.Sprintf("h_%d", i), InputSchema: []byte(`{"description":"` + strings.Repeat("b", 60<<10) + `"}`)})
	}
	for _, tc := range []struct {
		name   string
		tools  []*discoveryv1.StaticTool
		reason string
		fields []string
	}{
		{"no name", []*discoveryv1.StaticTool{{}}, "", []string{"tools[0].name"}},
		{"bad name", []*discoveryv1.StaticTool{{Name: "a b"}}, "", []string{"tools[0].name"}},
		{"duplicate", []*discoveryv1.StaticTool{{Name: "a"}, {Name: "b"}, {Name: "a"}}, "", []string{"tools[2].name"}},
		{"bad digest", []*discoveryv1.StaticTool{{Name: "a", DescriptorDigest: "sha256:ABC"}}, "", []string{"tools[0].descriptor_digest"}},
		{"digest and schema", []*discoveryv1.StaticTool{{Name: "a", DescriptorDigest: digest, InputSchema: []byte(`{}`)}}, "", []string{"tools[0].input_schema"}},
		{"schema not an object", []*discoveryv1.StaticTool{{Name: "a", InputSchema: []byte(`[1]`)}}, "", []string{"tools[0].input_schema"}},
		{"schema not JSON", []*discoveryv1.StaticTool{{Name: "a", InputSchema: []byte(`{"type":`)}}, "", []string{"tools[0].input_schema"}},
		{"schema over 64 KiB", []*discoveryv1.StaticTool{{Name: "a", InputSchema: bigSchema}}, "", []string{"tools[0].input_schema"}},
		{"output-only digest", []*discoveryv1.StaticTool{{Name: "a", InputSchemaDigest: digest}}, "", []string{"tools[0].input_schema_digest"}},
		{"over 10,000 tools", many, "", []string{"tools"}},
		{"over 2 MiB", heavy, "", []string{"tools"}},
		{"control character in reason", nil, "why\x1b[2J", []string{"reason"}},
		{"reason over 1000 bytes", nil, strings.Repeat("r", 1001), []string{"reason"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.admin.SetStaticToolList(ctx, &discoveryv1.SetStaticToolListRequest{ServerId: "inventory", AudienceClass: class,
				Tools: tc.tools, Reason: tc.reason})
			if got := violations(t, err); !slices.Equal(got, tc.fields) {
				t.Fatalf("fields %v, want %v (%v)", got, tc.fields, err)
			}
			if len(status.Convert(err).Message()) > 2000 {
				t.Fatalf("an unbounded message: %d bytes", len(status.Convert(err).Message()))
			}
		})
	}
	// Many bad entries: the first 20 are listed, then a count.
	var bad []*discoveryv1.StaticTool
	for range 100 {
		bad = append(bad, &discoveryv1.StaticTool{Name: "no good"})
	}
	_, err := e.admin.SetStaticToolList(ctx, &discoveryv1.SetStaticToolListRequest{ServerId: "inventory", AudienceClass: class, Tools: bad})
	if got := violations(t, err); len(got) != 21 || !slices.Contains(got, "tools") {
		t.Fatalf("100 bad entries: %d fields %v", len(got), got)
	}
	if _, err := e.admin.GetStaticToolList(ctx, &discoveryv1.GetStaticToolListRequest{ServerId: "inventory", AudienceClass: class}); status.Code(err) != codes.NotFound {
		t.Fatalf("a refused list was stored: %v", err)
	}

	if _, err := e.admin.SetStaticToolList(ctx, &discoveryv1.SetStaticToolListRequest{ServerId: "nowhere", AudienceClass: class}); status.Code(err) != codes.NotFound {
		t.Fatalf("an unknown server: %v", err)
	}
	e.reg.PutClass(&registryv1.AudienceClass{Name: "tenant-a.writers", TenantId: tenant})
	if _, err := e.admin.SetStaticToolList(ctx, &discoveryv1.SetStaticToolListRequest{ServerId: "inventory", AudienceClass: "tenant-a.writers"}); status.Code(err) != codes.FailedPrecondition || reason(err) != "NOT_COVERED" {
		t.Fatalf("a class not covering the server: %v", err)
	}
	for _, req := range []*discoveryv1.GetRunComparisonRequest{
		{}, {RunId: "nope"}, {RunId: "00000000-0000-4000-8000-000000000000", ServerId: "inventory"}, {ServerId: "inventory"},
		{ServerId: "inventory", AudienceClass: class, Generation: -1},
	} {
		if _, err := e.admin.GetRunComparison(ctx, req); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("GetRunComparison %v: %v", req, err)
		}
	}
}

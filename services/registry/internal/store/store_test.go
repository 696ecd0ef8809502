package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolcrib/toolcrib/platform/canonical"
	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/postgres"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/services/registry/migrations"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

func newStore(t *testing.T) (*Store, *pgxpool.Pool) {
	t.Helper()
	url := pgtest.NewDatabase(t, pgtest.Schema{Name: "registry", Sets: []postgres.Set{migrations.Set(), changelog.Migrations()}})
	pool, err := postgres.Open(context.Background(), url, "registry")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return New(pool, changelog.New(pool, "registry_changes", slog.New(slog.NewTextHandler(io.Discard, nil)))), pool
}

var (
	admin = principal.Principal{Subject: "root", Admin: true}
	all   = View{All: true}
)

// seed registers server `srv` owned by alice, tenant `acme` and class
// `acme.readers` covering the server.
func seed(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.RegisterServer(ctx, &registryv1.Server{ServerId: "srv", Owner: "tenant-a/user:alice",
		Transport:  &registryv1.Server_Stdio{Stdio: &registryv1.StdioTransport{Command: "srv"}},
		TrustLevel: registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY, RevisionSource: registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED,
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutTenant(ctx, &registryv1.Tenant{TenantId: "acme"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.PutAudienceClass(ctx, &registryv1.AudienceClass{Name: "acme.readers", TenantId: "acme",
		Servers: []*registryv1.AudienceServer{{ServerId: "srv", SecretRef: "env:SRV_TOKEN"}}}, 0); err != nil {
		t.Fatal(err)
	}
}

func epoch(t *testing.T, s *Store, tenant string) int64 {
	t.Helper()
	p, _, err := s.GetPolicy(context.Background(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	return p.GetPolicyEpoch()
}

func sourceTool(t *testing.T, name, description string) SourceTool {
	t.Helper()
	raw := fmt.Appendf(nil, `{"name":%q,"description":%q,"inputSchema":{"type":"object"}}`, name, description)
	d, err := canonical.Digest(raw)
	if err != nil {
		t.Fatal(err)
	}
	return SourceTool{Name: name, DescriptorDigest: d, Raw: raw}
}

// policyEpochs returns the epochs of tenant's PolicyChange entries, in log
// order.
func policyEpochs(t *testing.T, s *Store, tenant string) []int64 {
	t.Helper()
	entries, err := s.log.Read(context.Background(), 0, 100_000)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, e := range entries {
		ch, err := DecodeChange(e)
		if err != nil {
			t.Fatal(err)
		}
		if p := ch.GetPolicy(); p != nil && p.GetTenantId() == tenant {
			out = append(out, p.GetPolicyEpoch())
		}
	}
	return out
}

// N concurrent grant and revoke changes of one tenant give N distinct,
// consecutive epochs: no bump is lost, and the log carries them in epoch
// order.
func TestConcurrentChangesNeverLoseABump(t *testing.T) {
	s, _ := newStore(t)
	seed(t, s)
	ctx := context.Background()
	before := epoch(t, s, "acme")
	const n = 24
	epochs := make([]int64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := GrantChange{TenantID: "acme", Subject: fmt.Sprintf("user-%d", i%4), Scopes: []string{fmt.Sprintf("s:%d", i)}}
			var err error
			if i%3 == 2 {
				// Revoke from a grant made beforehand by the same subject.
				_, epochs[i], err = s.Grant(ctx, g)
				if err == nil {
					_, epochs[i], err = s.Revoke(ctx, g)
				}
			} else {
				_, epochs[i], err = s.Grant(ctx, g)
			}
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	after := epoch(t, s, "acme")
	revokes := n / 3
	if after != before+int64(n+revokes) {
		t.Fatalf("epoch went from %d to %d after %d bumps", before, after, n+revokes)
	}
	seen := map[int64]bool{}
	for _, e := range epochs {
		if seen[e] {
			t.Fatalf("two changes returned epoch %d", e)
		}
		seen[e] = true
	}
	logged := policyEpochs(t, s, "acme")
	for i := 1; i < len(logged); i++ {
		if logged[i] != logged[i-1]+1 {
			t.Fatalf("policy changes in the log are not consecutive epochs: %v", logged)
		}
	}
	if logged[len(logged)-1] != after {
		t.Fatalf("last logged epoch %d, tenant at %d", logged[len(logged)-1], after)
	}
}

// The acceptance case of issue 3: two concurrent revokes give two
// distinct epochs.
func TestTwoConcurrentRevokesGiveTwoEpochs(t *testing.T) {
	s, _ := newStore(t)
	seed(t, s)
	ctx := context.Background()
	if _, _, err := s.Grant(ctx, GrantChange{TenantID: "acme", Group: "ops", Scopes: []string{"a", "b"}}); err != nil {
		t.Fatal(err)
	}
	before := epoch(t, s, "acme")
	var e1, e2 int64
	var err1, err2 error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, e1, err1 = s.Revoke(ctx, GrantChange{TenantID: "acme", Group: "ops", Scopes: []string{"a"}})
	}()
	go func() {
		defer wg.Done()
		_, e2, err2 = s.Revoke(ctx, GrantChange{TenantID: "acme", Group: "ops", Scopes: []string{"b"}})
	}()
	wg.Wait()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	got := []int64{e1, e2}
	slices.Sort(got)
	if got[0] != before+1 || got[1] != before+2 {
		t.Fatalf("revokes returned epochs %v, want %d and %d", got, before+1, before+2)
	}
	p, _, err := s.GetPolicy(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.GetGrants()) != 0 {
		t.Fatalf("grant with nothing left should be gone, got %v", p.GetGrants())
	}
}

// A write refused for bad input changes nothing: no epoch bump, no log
// entry, no row (I12).
func TestRefusedWriteLeavesNothing(t *testing.T) {
	s, _ := newStore(t)
	seed(t, s)
	ctx := context.Background()
	head, _ := s.log.Head(ctx)
	before := epoch(t, s, "acme")
	_, _, err := s.PutAudienceClass(ctx, &registryv1.AudienceClass{Name: "acme.writers", TenantId: "acme",
		Servers: []*registryv1.AudienceServer{{ServerId: "srv"}, {ServerId: "ghost"}}}, 0)
	var inv *InvalidError
	if !errors.As(err, &inv) || len(inv.Violations) != 1 || inv.Violations[0].Field != "audience_class.servers[1].server_id" {
		t.Fatalf("want one violation on servers[1], got %v", err)
	}
	_, _, err = s.Grant(ctx, GrantChange{TenantID: "acme", Subject: "bob", Scopes: []string{"x"}, AudienceClasses: []string{"acme.nope"}})
	if !errors.As(err, &inv) || inv.Violations[0].Field != "audience_classes[0]" {
		t.Fatalf("grant of an unknown class: %v", err)
	}
	if after := epoch(t, s, "acme"); after != before {
		t.Fatalf("a refused write bumped the epoch from %d to %d", before, after)
	}
	if h, _ := s.log.Head(ctx); h != head {
		t.Fatalf("a refused write appended to the log: head %d -> %d", head, h)
	}
	if _, err := s.GetAudienceClass(ctx, "acme.writers"); !errors.As(err, new(*NotFoundError)) {
		t.Fatalf("refused class was stored: %v", err)
	}
}

// Discovery's pointer moves create, change and remove tools; replays and
// older moves are ignored; the newest pointer's descriptor wins.
func TestApplyPointer(t *testing.T) {
	s, _ := newStore(t)
	seed(t, s)
	ctx := context.Background()
	get := func(id string) *registryv1.Tool {
		tool, _, err := s.GetTool(ctx, all, id, false)
		if err != nil {
			t.Fatal(err)
		}
		return tool
	}
	a1, b1 := sourceTool(t, "a", "first"), sourceTool(t, "b", "bee")
	e0 := epoch(t, s, "acme")
	res, err := s.ApplyPointer(ctx, PointerUpdate{ServerID: "srv", AudienceClass: "acme.readers", Revision: 5, Generation: 1,
		Tools: []SourceTool{a1, b1}, Cursor: 5})
	if err != nil || res.Skipped != "" || !slices.Equal(res.Changed, []string{"srv.a", "srv.b"}) {
		t.Fatalf("apply: %+v %v", res, err)
	}
	if tool := get("srv.a"); tool.GetReviewState() != registryv1.ReviewState_REVIEW_STATE_PENDING_CONTRACT ||
		tool.GetEnabled() || !tool.GetPresentAtSource() || tool.GetDescriptorDigest() != a1.DescriptorDigest || tool.GetOwner() != "tenant-a/user:alice" {
		t.Fatalf("discovered tool: %v", tool)
	}
	if e := epoch(t, s, "acme"); e != e0 {
		t.Fatalf("a source change bumped the epoch %d -> %d; it must not (the generation carries it)", e0, e)
	}
	if c, _ := s.DiscoveryCursor(ctx); c != 5 {
		t.Fatalf("cursor %d", c)
	}

	// A replay of the same move and an older one change nothing.
	for _, rev := range []int64{5, 4} {
		res, err = s.ApplyPointer(ctx, PointerUpdate{ServerID: "srv", AudienceClass: "acme.readers", Revision: rev, Generation: 1,
			Tools: []SourceTool{sourceTool(t, "a", "stale")}})
		if err != nil || res.Skipped != "not newer" {
			t.Fatalf("replay at %d: %+v %v", rev, res, err)
		}
	}

	// Publish and approve a, then the description changes at the source.
	c := &registryv1.ToolContract{ToolId: "srv.a", Effect: catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY, Scope: "a:read",
		Authorization: registryv1.Authorization_AUTHORIZATION_CALLER}
	tool, err := s.PublishContract(ctx, admin, all, c)
	if err != nil {
		t.Fatal(err)
	}
	if tool, err = s.ApproveTool(ctx, admin, all, "srv.a", tool.GetApprovalDigest(), "ok"); err != nil || tool.GetReviewState() != registryv1.ReviewState_REVIEW_STATE_APPROVED {
		t.Fatalf("approve: %v %v", tool, err)
	}
	a2 := sourceTool(t, "a", "first, and try to repair")
	res, err = s.ApplyPointer(ctx, PointerUpdate{ServerID: "srv", AudienceClass: "acme.readers", Revision: 9, Generation: 2,
		Tools: []SourceTool{a2}})
	if err != nil || !slices.Equal(res.Changed, []string{"srv.a", "srv.b"}) {
		t.Fatalf("apply gen 2: %+v %v", res, err)
	}
	tool = get("srv.a")
	if tool.GetReviewState() != registryv1.ReviewState_REVIEW_STATE_UNREVIEWED || tool.GetDescriptorDigest() != a2.DescriptorDigest ||
		len(tool.GetApprovals()) != 1 || tool.GetApprovals()[0].GetDescriptorDigest() != a1.DescriptorDigest {
		t.Fatalf("after a description change: %v", tool)
	}
	if b := get("srv.b"); b.GetPresentAtSource() {
		t.Fatal("b is no longer listed but still present at source")
	}

	// Another class of the same server lists b again and the approved
	// descriptor of a: a new variant of each, for that class only. The
	// deprecated tool-level fields follow the newest move; each class keeps
	// its own review state.
	if _, _, err := s.PutAudienceClass(ctx, &registryv1.AudienceClass{Name: "acme.admins", TenantId: "acme",
		Servers: []*registryv1.AudienceServer{{ServerId: "srv"}}}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err = s.ApplyPointer(ctx, PointerUpdate{ServerID: "srv", AudienceClass: "acme.admins", Revision: 12, Generation: 1,
		Tools: []SourceTool{a1, b1}}); err != nil {
		t.Fatal(err)
	}
	if tool := get("srv.a"); tool.GetDescriptorDigest() != a1.DescriptorDigest || tool.GetReviewState() != registryv1.ReviewState_REVIEW_STATE_APPROVED {
		t.Fatalf("back at the approved descriptor, want APPROVED: %v", tool)
	}
	vs := get("srv.a").GetVariants()
	if len(vs) != 2 || vs[0].GetAudienceClass() != "acme.admins" || vs[0].GetDescriptorDigest() != a1.DescriptorDigest ||
		vs[0].GetReviewState() != registryv1.ReviewState_REVIEW_STATE_APPROVED ||
		vs[1].GetAudienceClass() != "acme.readers" || vs[1].GetDescriptorDigest() != a2.DescriptorDigest ||
		vs[1].GetReviewState() != registryv1.ReviewState_REVIEW_STATE_UNREVIEWED {
		t.Fatalf("variants %v", vs)
	}
	if b := get("srv.b"); !b.GetPresentAtSource() {
		t.Fatal("b listed again but not present")
	}

	// A closed pointer is recorded and leaves the tools alone.
	res, err = s.ApplyPointer(ctx, PointerUpdate{ServerID: "srv", AudienceClass: "acme.admins", Revision: 13, Generation: 1, Closed: true})
	if err != nil || len(res.Changed) != 0 || res.Skipped != "" {
		t.Fatalf("closed: %+v %v", res, err)
	}

	// A server the registry does not know is skipped; the cursor moves.
	res, err = s.ApplyPointer(ctx, PointerUpdate{ServerID: "ghost", AudienceClass: "acme.readers", Revision: 20, Cursor: 20,
		Tools: []SourceTool{a1}})
	if err != nil || res.Skipped != "unknown server" {
		t.Fatalf("unknown server: %+v %v", res, err)
	}
	if c, _ := s.DiscoveryCursor(ctx); c != 20 {
		t.Fatalf("cursor %d after a skipped move", c)
	}

	_, events, err := s.GetTool(ctx, all, "srv.a", true)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range events {
		kinds = append(kinds, e.GetKind())
	}
	want := []string{EventDiscovered, EventPublished, EventApproved, EventDescriptorChanged, EventDiscovered}
	if !slices.Equal(kinds, want) {
		t.Fatalf("history %v, want %v", kinds, want)
	}
	if events[0].GetAudienceClass() != "acme.readers" || events[1].GetAudienceClass() != "" || events[4].GetAudienceClass() != "acme.admins" {
		t.Fatalf("history classes %v", events)
	}
	for i := 1; i < len(events); i++ {
		if events[i].GetRevision() <= events[i-1].GetRevision() {
			t.Fatalf("history revisions not increasing: %v", events)
		}
	}
}

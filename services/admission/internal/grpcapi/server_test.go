package grpcapi

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/postgres"
	"github.com/toolcrib/toolcrib/platform/redisclient"
	"github.com/toolcrib/toolcrib/platform/redistest"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/admission/internal/args"
	"github.com/toolcrib/toolcrib/services/admission/internal/cache"
	"github.com/toolcrib/toolcrib/services/admission/internal/decision"
	"github.com/toolcrib/toolcrib/services/admission/internal/receipts"
	"github.com/toolcrib/toolcrib/services/admission/internal/replica"
	"github.com/toolcrib/toolcrib/services/admission/migrations"
)

// sources is an in-memory registry and discovery behind the replica's
// consumer interfaces (the gRPC adapters are wired in package admission).
type sources struct {
	mu       sync.Mutex
	policies map[string][]replica.Policy // by tenant, oldest first
	gens     map[[2]string]map[int64]*replica.Generation
	pointers map[[2]string]replica.Pointer
	reviews  map[string]decision.Review // by tool id + "@" + digest
	reads    int
}

func (s *sources) Current(_ context.Context, tenant string) (replica.Policy, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	ps := s.policies[tenant]
	if len(ps) == 0 {
		return replica.Policy{}, replica.ErrNotFound
	}
	return ps[len(ps)-1], nil
}

func (s *sources) PolicyAt(_ context.Context, tenant string, epoch int64) (replica.Policy, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	for _, p := range s.policies[tenant] {
		if p.Epoch == epoch {
			return p, nil
		}
	}
	return replica.Policy{}, replica.ErrNotKept
}

func (s *sources) Generation(_ context.Context, server, class string, gen int64) (*replica.Generation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	g := s.gens[[2]string{server, class}][gen]
	if g == nil {
		return nil, replica.ErrNotFound
	}
	return g, nil
}

func (s *sources) Review(_ context.Context, _ string, _ int64, _, toolID, digest string) (decision.Review, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	return s.reviews[toolID+"@"+digest], nil
}

func (s *sources) Pointer(_ context.Context, server, class string) (replica.Pointer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pointers[[2]string{server, class}]
	if !ok {
		return replica.Pointer{}, replica.ErrNotFound
	}
	return p, nil
}

var (
	digA   = "sha256:" + strings.Repeat("a", 64)
	digB   = "sha256:" + strings.Repeat("b", 64)
	schema = `{"type":"object","properties":{"shipment_id":{"type":"string"}},"required":["shipment_id"]}`
)

// world is seed 004's setup for two tenants: the same server `logistics`
// and tool id `logistics.shipment_status` with the same digest, read by
// demo-a.readers and demo-b.readers.
func world() *sources {
	s := &sources{policies: map[string][]replica.Policy{}, gens: map[[2]string]map[int64]*replica.Generation{},
		pointers: map[[2]string]replica.Pointer{}, reviews: map[string]decision.Review{}}
	for _, tenant := range []string{"demo-a", "demo-b"} {
		class := tenant + ".readers"
		s.policies[tenant] = []replica.Policy{{Tenant: tenant, Epoch: 5,
			Grants:  []decision.Grant{{Subject: "alice", Scopes: []string{"shipment:read"}, Classes: []string{class}}},
			Classes: map[string][]string{class: {"logistics"}}}}
		tools := map[string]*replica.ToolEntry{
			"logistics.shipment_status": {ToolID: "logistics.shipment_status", Name: "shipment_status", Description: "Query a shipment's status.",
				DescriptorDigest: digA, InputSchemaDigest: "sha256:" + strings.Repeat("c", 64), InputSchema: []byte(schema)},
		}
		s.gens[[2]string{"logistics", class}] = map[int64]*replica.Generation{7: {ServerID: "logistics", Class: class, Generation: 7, Tools: tools}}
		s.pointers[[2]string{"logistics", class}] = replica.Pointer{ServerID: "logistics", Class: class, Tenant: tenant,
			Generation: 7, FreshUntil: time.Now().Add(time.Hour), Revision: 1}
	}
	s.reviews["logistics.shipment_status@"+digA] = decision.Review{Known: true, Enabled: true,
		Approved: &decision.Contract{Effect: catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY, Scope: "shipment:read"}}
	return s
}

type rig struct {
	auth    *servicetest.Auth
	addr    string
	heads   *replica.Heads
	src     *sources
	writer  *receipts.Writer
	cache   *cache.Cache
	srv     *Server
	clients map[string]admissionv1.AdmissionServiceClient
}

func newRig(t *testing.T, src *sources, redis *redisclient.Client) *rig {
	t.Helper()
	return newRigWith(t, src, redis, nil)
}

// newRigWith is newRig with the server's options edited by edit (nil: as
// newRig).
func newRigWith(t *testing.T, src *sources, redis *redisclient.Client, edit func(*Options)) *rig {
	t.Helper()
	auth := servicetest.NewAuth(t)
	v := auth.Verifier(t)
	url := pgtest.NewDatabase(t, pgtest.Schema{Name: "admission", Sets: []postgres.Set{migrations.Set()}})
	pool, err := postgres.Open(context.Background(), url, "admission")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	heads := replica.NewHeads(5*time.Second, nil)
	heads.Heartbeat(changelog.RegistryHead)
	heads.Heartbeat(changelog.DiscoveryHead)
	w := receipts.New(pool, receipts.Options{Interval: 10 * time.Millisecond})
	c := cache.New(cache.Options{Redis: redis, RedisTimeout: 50 * time.Millisecond})
	t.Cleanup(c.Close)
	o := Options{Heads: heads, Material: replica.NewMaterial(src, src, src, 1000), Pointers: src, Cache: c,
		Validator: args.NewValidator(100), Limits: args.DefaultLimits, Receipts: w, Replica: "test:1", Confirmers: v}
	if edit != nil {
		edit(&o)
	}
	srv := New(o)
	gs := grpc.NewServer(grpc.UnaryInterceptor(v.UnaryServerInterceptor()))
	admissionv1.RegisterAdmissionServiceServer(gs, srv)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	r := &rig{auth: auth, addr: lis.Addr().String(), heads: heads, src: src, writer: w, cache: c, srv: srv,
		clients: map[string]admissionv1.AdmissionServiceClient{}}
	return r
}

func (r *rig) client(t *testing.T, subject, tenant string) admissionv1.AdmissionServiceClient {
	k := subject + "@" + tenant
	if c, ok := r.clients[k]; ok {
		return c
	}
	c := admissionv1.NewAdmissionServiceClient(servicetest.Dial(t, r.addr, r.auth.User(t, subject, tenant)))
	r.clients[k] = c
	return c
}

func okReq() *admissionv1.CheckRequest {
	return &admissionv1.CheckRequest{ToolId: "logistics.shipment_status", Generation: 7, DescriptorDigest: digA,
		PolicyEpoch: 5, Arguments: []byte(`{"shipment_id":"S1"}`), Mode: admissionv1.Mode_MODE_AUTONOMOUS}
}

func check(t *testing.T, c admissionv1.AdmissionServiceClient, req *admissionv1.CheckRequest) *admissionv1.CheckResponse {
	t.Helper()
	resp, err := c.Check(context.Background(), req)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	return resp
}

// TestSeed004ThroughTheAPI is seed 004's eleven admit() cases through the
// real gRPC API with real tokens (see decision.TestSeed004Admit for the
// mapping of the four invalid_input cases onto request fields).
func TestSeed004ThroughTheAPI(t *testing.T) {
	cases := []struct {
		seed  string
		setup func(*rig)
		req   func(*admissionv1.CheckRequest)
		sub   string
		want  catalogv1.DecisionReason
	}{
		{"allow", nil, nil, "alice", decision.Allow},
		{"enabled: false", func(r *rig) {
			rv := r.src.reviews["logistics.shipment_status@"+digA]
			rv.Enabled = false
			r.src.reviews["logistics.shipment_status@"+digA] = rv
		}, nil, "alice", decision.Disabled},
		{"version 8, approved 7", func(r *rig) {
			g := r.src.gens[[2]string{"logistics", "demo-a.readers"}][7]
			te := *g.Tools["logistics.shipment_status"]
			te.DescriptorDigest = digB // the source moved on; digB is not approved
			g.Tools["logistics.shipment_status"] = &te
			r.src.reviews["logistics.shipment_status@"+digB] = decision.Review{Known: true, Enabled: true}
		}, nil, "alice", decision.Unreviewed},
		{"call version 6", nil, func(q *admissionv1.CheckRequest) { q.DescriptorDigest = digB }, "alice", decision.StaleSchema},
		{"now = policyValidUntil", func(r *rig) {
			r.heads = replica.NewHeads(5*time.Second, nil) // never caught up
			r.srv.o.Heads = r.heads
		}, nil, "alice", decision.StalePolicy},
		{"call tenant demo-b", nil, func(q *admissionv1.CheckRequest) { q.AudienceClass = "demo-b.readers" }, "alice", decision.Forbidden},
		{"actor scopes []", func(r *rig) {
			p := &r.src.policies["demo-a"][0]
			p.Grants = []decision.Grant{{Subject: "alice", Classes: []string{"demo-a.readers"}}}
		}, nil, "alice", decision.Forbidden},
		{"policyValidUntilMs undefined", nil, func(q *admissionv1.CheckRequest) { q.DescriptorDigest = "" }, "alice", decision.InvalidInput},
		{"policyValidUntilMs NaN", nil, func(q *admissionv1.CheckRequest) { q.Generation = 0 }, "alice", decision.InvalidInput},
		{"nowMs NaN", nil, func(q *admissionv1.CheckRequest) { q.Mode = admissionv1.Mode_MODE_UNSPECIFIED }, "alice", decision.InvalidInput},
		{"scopes a string", nil, func(q *admissionv1.CheckRequest) { q.Arguments = []byte(`"shipment:readwrite"`) }, "alice", decision.InvalidInput},
	}
	for _, tc := range cases {
		t.Run(tc.seed, func(t *testing.T) {
			r := newRig(t, world(), nil)
			if tc.setup != nil {
				tc.setup(r)
			}
			req := okReq()
			if tc.req != nil {
				tc.req(req)
			}
			resp := check(t, r.client(t, tc.sub, "demo-a"), req)
			if resp.GetReason() != tc.want {
				t.Fatalf("reason %v (%q), want %v", resp.GetReason(), resp.GetDetail(), tc.want)
			}
			wantDecision := admissionv1.Decision_DECISION_DENY
			if tc.want == decision.Allow {
				wantDecision = admissionv1.Decision_DECISION_ALLOW
			}
			rec := resp.GetReceipt()
			if resp.GetDecision() != wantDecision || rec.GetDecision() != wantDecision || rec.GetSubject() != "alice" || rec.GetTenantId() != "demo-a" {
				t.Fatalf("decision %v, receipt %v", resp.GetDecision(), rec)
			}
			if tc.want == decision.Allow && (rec.GetGeneration() != 7 || rec.GetDescriptorDigest() != digA || rec.GetPolicyEpoch() != 5) {
				t.Fatalf("the receipt does not bind generation, digest and epoch: %v", rec)
			}
			// The receipt is answered before the batch is written, and only to its principal.
			if _, err := r.writer.Lookup(context.Background(), rec.GetReceiptId(), "demo-a", "alice"); err != nil {
				t.Fatalf("receipt lookup: %v", err)
			}
			if _, err := r.writer.Lookup(context.Background(), rec.GetReceiptId(), "demo-b", "alice"); err == nil {
				t.Fatal("another tenant looked the receipt up")
			}
		})
	}
}

func TestArgumentsInvalidNamesThePointerAfterTheCache(t *testing.T) {
	redis := redistest.NewClient(t)
	r := newRig(t, world(), redis)
	c := r.client(t, "alice", "demo-a")
	if got := check(t, c, okReq()).GetReason(); got != decision.Allow {
		t.Fatalf("warm-up: %v", got)
	}
	req := okReq()
	req.Arguments = []byte(`{"shipment_id":42}`)
	resp := check(t, c, req) // an L1 hit for the decision; the arguments still checked
	if resp.GetReason() != decision.ArgumentsInvalid || !strings.Contains(resp.GetDetail(), "/shipment_id") {
		t.Fatalf("%v %q", resp.GetReason(), resp.GetDetail())
	}
	if r.cache.Stats().Hits[cache.L1] == 0 {
		t.Fatal("the second Check did not use the cache")
	}
	req.Arguments = []byte(`{"shipment_id":"` + strings.Repeat("x", 1<<20) + `"}`)
	resp = check(t, c, req)
	if resp.GetReason() != decision.InvalidInput || strings.Contains(resp.GetDetail(), "xxxx") || len(resp.GetDetail()) > 200 {
		t.Fatalf("a megabyte of arguments: %v %.100q", resp.GetReason(), resp.GetDetail())
	}
}

// TestCrossTenantThroughTheAPI: demo-b's principal, asking for the same
// tool id and digest demo-a's principal was just allowed (and cached),
// never gets demo-a's entry: through its own class it gets its own decision
// (here its tool is disabled), through demo-a's class FORBIDDEN, and
// without any class of its own NOT_FOUND.
func TestCrossTenantThroughTheAPI(t *testing.T) {
	redis := redistest.NewClient(t)
	src := world()
	// demo-b's variant of the tool is not enabled (a per-tenant review).
	src.reviews = map[string]decision.Review{}
	reviews := &tenantReviews{sources: src, byTenant: map[string]decision.Review{
		"demo-a": {Known: true, Enabled: true, Approved: &decision.Contract{Effect: catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY, Scope: "shipment:read"}},
		"demo-b": {Known: true, Enabled: false},
	}}
	r := newRig(t, src, redis)
	r.srv.o.Material = replica.NewMaterial(src, src, reviews, 1000)
	a, b := r.client(t, "alice", "demo-a"), r.client(t, "alice", "demo-b")
	if got := check(t, a, okReq()).GetReason(); got != decision.Allow {
		t.Fatalf("demo-a: %v", got)
	}
	if got := check(t, a, okReq()).GetReason(); got != decision.Allow || r.cache.Stats().Hits[cache.L1] != 1 {
		t.Fatalf("demo-a second call: %v, stats %+v", got, r.cache.Stats())
	}
	if got := check(t, b, okReq()).GetReason(); got != decision.Disabled {
		t.Fatalf("demo-b through its own class: %v", got)
	}
	req := okReq()
	req.AudienceClass = "demo-a.readers"
	if got := check(t, b, req).GetReason(); got != decision.Forbidden {
		t.Fatalf("demo-b naming demo-a's class: %v", got)
	}
	// A demo-b principal without grants does not learn the tool exists.
	if got := check(t, r.client(t, "mallory", "demo-b"), okReq()).GetReason(); got != decision.NotFound {
		t.Fatalf("demo-b without grants: %v", got)
	}
	// Nor does a principal of a tenant the registry does not know.
	if got := check(t, r.client(t, "eve", "nobody"), okReq()).GetReason(); got != decision.NotFound {
		t.Fatalf("unknown tenant: %v", got)
	}
	list, err := b.ListVisibleTools(context.Background(), &admissionv1.ListVisibleToolsRequest{})
	if err != nil || len(list.GetTools()) != 0 {
		t.Fatalf("demo-b lists %v (%v): demo-a's tool leaked", list.GetTools(), err)
	}
}

type tenantReviews struct {
	*sources
	byTenant map[string]decision.Review
}

func (t *tenantReviews) Review(_ context.Context, tenant string, _ int64, _, _, _ string) (decision.Review, error) {
	return t.byTenant[tenant], nil
}

func TestStalePolicyFailsClosed(t *testing.T) {
	clk := time.Now()
	r := newRig(t, world(), nil)
	r.heads = replica.NewHeads(5*time.Second, func() time.Time { return clk })
	r.heads.Heartbeat(changelog.RegistryHead)
	r.heads.Heartbeat(changelog.DiscoveryHead)
	r.srv.o.Heads = r.heads
	r.srv.o.Now = func() time.Time { return clk }
	c := r.client(t, "alice", "demo-a")
	resp := check(t, c, okReq())
	if resp.GetReason() != decision.Allow || !resp.GetValidUntil().AsTime().Equal(clk.Add(5*time.Second)) {
		t.Fatalf("fresh: %v valid until %v", resp.GetReason(), resp.GetValidUntil().AsTime())
	}
	// The discovery stream goes quiet; the registry keeps beating.
	clk = clk.Add(3 * time.Second)
	r.heads.Heartbeat(changelog.RegistryHead)
	clk = clk.Add(2 * time.Second)
	if got := check(t, c, okReq()).GetReason(); got != decision.StalePolicy {
		t.Fatalf("after the window: %v, want STALE_POLICY (the cached ALLOW must not be served)", got)
	}
	if ok, why := r.heads.Fresh(); ok || !strings.Contains(why, "discovery") {
		t.Fatalf("health says %v %q", ok, why)
	}
	_, err := c.ListVisibleTools(context.Background(), &admissionv1.ListVisibleToolsRequest{})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("ListVisibleTools while stale: %v", err)
	}
	r.heads.Heartbeat(changelog.DiscoveryHead)
	if got := check(t, c, okReq()).GetReason(); got != decision.Allow {
		t.Fatalf("caught up again: %v", got)
	}
}

func TestRedisDownKeepsDeciding(t *testing.T) {
	dead := redisclient.Open("127.0.0.1:1", "x:")
	defer dead.Close()
	src := world()
	r := newRig(t, src, dead)
	c := r.client(t, "alice", "demo-a")
	for range 3 {
		if got := check(t, c, okReq()).GetReason(); got != decision.Allow {
			t.Fatalf("Redis down: %v", got)
		}
	}
	// A revocation (new epoch) is decided directly, never from an old entry.
	src.mu.Lock()
	src.policies["demo-a"] = append(src.policies["demo-a"], replica.Policy{Tenant: "demo-a", Epoch: 6,
		Grants:  []decision.Grant{{Subject: "alice", Classes: []string{"demo-a.readers"}}},
		Classes: map[string][]string{"demo-a.readers": {"logistics"}}})
	src.mu.Unlock()
	r.heads.SetEpoch("demo-a", 6)
	resp := check(t, c, okReq())
	if resp.GetReason() != decision.PolicyRevoked || resp.GetCurrentPolicyEpoch() != 6 {
		t.Fatalf("after the revocation with Redis down: %v epoch %d", resp.GetReason(), resp.GetCurrentPolicyEpoch())
	}
	req := okReq()
	req.PolicyEpoch = 0
	if got := check(t, c, req).GetReason(); got != decision.Forbidden {
		t.Fatalf("plan without an epoch: %v", got)
	}
}

func TestListVisibleTools(t *testing.T) {
	r := newRig(t, world(), nil)
	c := r.client(t, "alice", "demo-a")
	resp, err := c.ListVisibleTools(context.Background(), &admissionv1.ListVisibleToolsRequest{Query: "shipment status"})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetTools()) != 1 || resp.GetTools()[0].GetModel().GetName() != "shipment_status" ||
		resp.GetTools()[0].GetRuntime().GetDescriptorDigest() != digA || resp.GetPolicyEpoch() != 5 ||
		!strings.HasPrefix(resp.GetVisibleSetDigest(), "sha256:") || resp.GetVisibleCount() != 1 {
		t.Fatalf("%v", resp)
	}
	// The server alice reads, once, though only one of its tools is hers.
	if sv := resp.GetServers(); len(sv) != 1 || sv[0].GetServerId() != "logistics" || sv[0].GetAudienceClass() != "demo-a.readers" {
		t.Fatalf("servers %v", sv)
	}
	_, err = c.ListVisibleTools(context.Background(), &admissionv1.ListVisibleToolsRequest{Query: strings.Repeat("q", 2000)})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("long query: %v", err)
	}
	noAuth := admissionv1.NewAdmissionServiceClient(servicetest.Dial(t, r.addr, ""))
	if _, err := noAuth.Check(context.Background(), okReq()); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no token: %v", err)
	}
	_ = registryv1.Confirmation_CONFIRMATION_ALWAYS
}

// TestReceiptIDsAreTimeOrderedV7: ids from the pool parse as version-7
// UUIDs carrying the decision's millisecond, sort by it, never repeat over
// several refills, and differ between pools at the same millisecond.
func TestReceiptIDsAreTimeOrderedV7(t *testing.T) {
	at := time.UnixMilli(1_780_000_000_123)
	a, b := idPool{now: func() time.Time { return at }}, idPool{now: func() time.Time { return at }}
	seen := map[string]bool{}
	prev := ""
	for i := range 3 * 256 {
		if i%256 == 0 {
			at = at.Add(time.Millisecond)
		}
		id := a.next()
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 7 || u.Variant() != uuid.RFC4122 {
			t.Fatalf("%q: %v, version %v, variant %v", id, err, u.Version(), u.Variant())
		}
		if sec, nsec := u.Time().UnixTime(); time.Unix(sec, nsec).UnixMilli() != at.UnixMilli() {
			t.Fatalf("%q carries %v, want %v", id, time.Unix(sec, nsec), at)
		}
		if seen[id] {
			t.Fatalf("%q repeated", id)
		}
		if i%256 == 0 && id < prev {
			t.Fatalf("%q of a later millisecond sorts before %q", id, prev)
		}
		seen[id], prev = true, id
	}
	if id := b.next(); seen[id] {
		t.Fatalf("a second pool repeated %q", id)
	}
}

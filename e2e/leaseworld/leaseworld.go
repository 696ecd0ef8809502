// Package leaseworld starts the real registry, discovery, admission and
// lease services with one versioned MCP server whose READ_ONLY tool
// `inventory.shipment_status` is approved and enabled for tenant-a's
// readers, for the lease tests of the suite and the lease benchmark.
package leaseworld

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"slices"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	"github.com/toolcrib/toolcrib/e2e/stack"
	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/config"
	"github.com/toolcrib/toolcrib/platform/redistest"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/revision/lease"
	"github.com/toolcrib/toolcrib/services/admission"
	"github.com/toolcrib/toolcrib/services/discovery"
	leasesvc "github.com/toolcrib/toolcrib/services/lease"
	"github.com/toolcrib/toolcrib/services/registry"
)

// The world's names.
const (
	ServerID = "inventory"
	Tenant   = "tenant-a"
	Class    = "tenant-a.readers"
	ToolID   = "inventory.shipment_status"
	// Audience is the executor audience of the leases issued here.
	Audience = "executor.inventory"
)

const (
	serverID = ServerID
	tenant   = Tenant
	class    = Class
	toolID   = ToolID
)

// ShipmentStatus is the tool, with a description.
func ShipmentStatus(description string) fixture.Tool {
	return fixture.MustRawTool(`{"name":"shipment_status","description":"` + description + `",
"inputSchema":{"type":"object","properties":{"shipment_id":{"type":"string"}},"required":["shipment_id"]},
"outputSchema":{"type":"object","properties":{"shipment_id":{"type":"string"},"status":{"type":"string"},
"updated_at":{"type":"string"}},"required":["shipment_id","status"]},
"annotations":{"readOnlyHint":true}}`)
}

// Reserve is a second tool, to make a second generation.
func Reserve() fixture.Tool {
	return fixture.MustRawTool(`{"name":"reserve","description":"Hold units of one SKU for an order.",
"inputSchema":{"type":"object","properties":{"sku":{"type":"string"},"units":{"type":"integer"}}}}`)
}

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func descriptorDigest(t testing.TB, s *catalogv1.Snapshot, name string) string {
	t.Helper()
	i := slices.IndexFunc(s.GetTools(), func(d *catalogv1.ToolDescriptor) bool { return d.GetName() == name })
	if i < 0 {
		t.Fatalf("snapshot generation %d has no tool %s", s.GetGeneration(), name)
	}
	return s.GetTools()[i].GetDescriptorDigest()
}

// World is the real registry, discovery, admission and lease services
// with one versioned MCP server whose READ_ONLY tool is approved and
// enabled for tenant-a's readers.
type World struct {
	St  *stack.Stack
	Srv *fixture.Server
	// Adm and Lease are clients of alice and bob (tenant-a, group readers).
	Adm   map[string]admissionv1.AdmissionServiceClient
	Lease map[string]leasev1.LeaseServiceClient
	// Admin is a lease client with an admin token.
	Admin leasev1.LeaseServiceClient
	// LeaseAddr is the lease service's address.
	LeaseAddr string
	// AdmissionDB is the admission service's database (another replica
	// started over it shares the receipts).
	AdmissionDB string
	// LeaseDB is the lease service's database.
	LeaseDB string
	// Digest is shipment_status's descriptor digest.
	Digest string
	// Holder and JWK are the holder key of every lease issued here.
	Holder ed25519.PrivateKey
	JWK    []byte
	// AdmissionAddr is the admission replica the lease service asks.
	AdmissionAddr string
	// AdmissionRedisPrefix is that replica's Redis prefix (its decision
	// cache's L2 keys start with it).
	AdmissionRedisPrefix string

	acfg                admission.Config
	aurl                string
	lcfg                leasesvc.Config
	lurl, leaseRedisPre string
	leaseEdit           func(*config.Common)
	leaseServiceEdit    func(*leasesvc.Config)
}

// StartAdmission runs another admission replica of the world (same
// database, its own L2 prefix) and returns its address.
func (w *World) StartAdmission(t testing.TB) string {
	t.Helper()
	return w.St.StartAdmission(t, w.acfg, w.aurl, nil)
}

// StartAdmissionSharingL2 runs another admission replica of the world over
// the same database and the same decision-cache L2 (Redis prefix) as the
// first, with its configuration changed by edit (nil: unchanged), and
// returns its address.
func (w *World) StartAdmissionSharingL2(t testing.TB, edit func(*admission.Config)) string {
	t.Helper()
	return w.St.StartAdmission(t, w.acfg, w.aurl, func(c *admission.Config) {
		c.RedisPrefix = w.AdmissionRedisPrefix
		if edit != nil {
			edit(c)
		}
	})
}

// StartLease runs another lease replica of the world: the same signing
// keys, database and Redis prefix (single use is shared), and returns its
// address.
func (w *World) StartLease(t testing.TB) string {
	t.Helper()
	return w.StartLeaseWith(t, nil)
}

// StartLeaseWith is [World.StartLease] with edit applied to the replica's
// configuration last (e.g. its registry reached through a proxy).
func (w *World) StartLeaseWith(t testing.TB, edit func(*leasesvc.Config)) string {
	t.Helper()
	return w.St.StartLease(t, w.lcfg, w.lurl, func(c *leasesvc.Config) {
		c.RedisPrefix = w.leaseRedisPre
		if w.leaseEdit != nil {
			w.leaseEdit(&c.Common)
		}
		if w.leaseServiceEdit != nil {
			w.leaseServiceEdit(c)
		}
		if edit != nil {
			edit(c)
		}
	})
}

// Start runs the world until the test ends; admission keeps decisions
// (and GetReceipt answers valid_until) for cacheTTL.
func Start(t testing.TB, cacheTTL time.Duration) *World {
	t.Helper()
	return StartWith(t, Options{CacheTTL: cacheTTL})
}

// Options shape a world.
type Options struct {
	// CacheTTL is admission's decision lifetime.
	CacheTTL time.Duration
	// Lease edits the lease service's common configuration last (e.g.
	// Redis through a proxy); it applies to every lease replica.
	Lease func(*config.Common)
	// LeaseService edits the lease service's own configuration (e.g. the
	// benchmark's floor handlers, leasesvc.Config.Extra); it applies to
	// every lease replica, after Lease.
	LeaseService func(*leasesvc.Config)
	// Heartbeat is the registry's and discovery's Watch heartbeat; 0 for
	// their default.
	Heartbeat time.Duration
	// Discovery edits discovery's configuration last (e.g. the rollout
	// guard's flags); its AdmissionAddr is the world's admission.
	Discovery func(*discovery.Config)
	// TLS runs every service with TLS and mTLS between them, each known to
	// the others by its SPIFFE certificate (stack.Options.TLS).
	TLS bool
}

// StartWith is Start with options.
func StartWith(t testing.TB, o Options) *World {
	t.Helper()
	ctx := ctxFor(t)
	cacheTTL := o.CacheTTL
	// Discovery's rollout guard asks the world's admission, which starts
	// after it.
	admAddr := stack.ReserveAddr(t)
	st := stack.Start(t, stack.Options{
		TLS: o.TLS,
		Registry: func(c *registry.Config) {
			if o.Heartbeat > 0 {
				c.WatchHeartbeat = o.Heartbeat
			}
		},
		Discovery: func(c *discovery.Config) {
			c.Linger = 0
			c.AdmissionAddr = admAddr
			if o.Heartbeat > 0 {
				c.WatchHeartbeat = o.Heartbeat
			}
			if o.Discovery != nil {
				o.Discovery(c)
			}
		},
	})
	srv, err := fixture.New(fixture.Script{Name: "inventory", Versioned: true,
		Tools: []fixture.Tool{ShipmentStatus("Query the current status of a shipment.")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ep, err := srv.StartHTTP(fixture.HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })
	reg := st.Registry
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(reg.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: &registryv1.Server{
		ServerId: serverID, Owner: tenant + "/group:inventory-team",
		Transport:      &registryv1.Server_StreamableHttp{StreamableHttp: &registryv1.StreamableHttpTransport{Url: ep.URL}},
		TrustLevel:     registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY,
		RevisionSource: registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED,
		ScanInterval:   durationpb.New(time.Hour),
	}}))
	must(reg.PutTenant(ctx, &registryv1.PutTenantRequest{Tenant: &registryv1.Tenant{TenantId: tenant}}))
	must(reg.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: &registryv1.AudienceClass{
		Name: class, TenantId: tenant, Servers: []*registryv1.AudienceServer{{ServerId: serverID}}}}))
	must(reg.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenant, Group: "readers",
		Scopes: []string{"shipment:read"}, AudienceClasses: []string{class}}))
	key := discovery.PointerKey{ServerID: serverID, AudienceClass: class}
	must(st.Discovery.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: serverID, AudienceClass: class}))
	if _, err := discovery.WaitPointers(ctx, st.Discovery, 0, []discovery.PointerKey{key}, nil); err != nil {
		t.Fatal(err)
	}
	active, err := st.Discovery.GetActiveSnapshot(ctx, &discoveryv1.GetActiveSnapshotRequest{ServerId: serverID, AudienceClass: class})
	if err != nil {
		t.Fatal(err)
	}
	w := &World{St: st, Srv: srv, Digest: descriptorDigest(t, active.GetSnapshot(), "shipment_status"),
		Adm: map[string]admissionv1.AdmissionServiceClient{}, Lease: map[string]leasev1.LeaseServiceClient{}}
	servicetest.Eventually(t, 30*time.Second, "the registry learns the tool", func() bool {
		_, err := reg.GetTool(ctx, &registryv1.GetToolRequest{ToolId: toolID})
		return err == nil
	})
	pub, err := reg.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: &registryv1.ToolContract{
		ToolId: toolID, Effect: catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY, Scope: "shipment:read",
		Authorization: registryv1.Authorization_AUTHORIZATION_CALLER_AND_TENANT,
		AllowedFields: []string{"shipment_id", "status", "updated_at"}, RequiredEvidence: []string{"shipment_id"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	must(reg.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: toolID, ApprovalDigest: pub.GetTool().GetApprovalDigest()}))
	must(reg.EnableTool(ctx, &registryv1.EnableToolRequest{ToolId: toolID}))

	// Admission and lease, each with its own database, as dev up starts them.
	acfg := st.AdmissionConfig(t)
	acfg.CacheTTL = cacheTTL
	aurl := stack.AdmissionDB(t)
	w.AdmissionRedisPrefix = redistest.NewPrefix(t)
	st.StartAdmission(t, acfg, aurl, func(c *admission.Config) { c.ListenAddr, c.RedisPrefix = admAddr, w.AdmissionRedisPrefix })
	lcfg := st.LeaseConfig(t, admAddr, "")
	lurl := stack.LeaseDB(t)
	w.acfg, w.aurl, w.lcfg, w.lurl, w.leaseRedisPre, w.leaseEdit = acfg, aurl, lcfg, lurl, redistest.NewPrefix(t), o.Lease
	w.leaseServiceEdit = o.LeaseService
	w.AdmissionAddr, w.AdmissionDB, w.LeaseDB = admAddr, aurl, lurl
	leaseAddr := w.StartLease(t)
	for _, who := range []string{"alice", "bob"} {
		tok := st.Auth.User(t, who, tenant, "readers")
		w.Adm[who] = admissionv1.NewAdmissionServiceClient(st.Auth.Dial(t, admAddr, tok))
		w.Lease[who] = leasev1.NewLeaseServiceClient(st.Auth.Dial(t, leaseAddr, tok))
	}
	w.Admin = leasev1.NewLeaseServiceClient(st.Auth.Dial(t, leaseAddr, st.Auth.Admin(t)))
	w.LeaseAddr = leaseAddr
	pubKey, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	w.Holder, w.JWK = priv, lease.PublicJWK(pubKey)
	return w
}

// StartAdmissionAndLease runs admission and lease, each with its own
// database, as dev up starts them, against the registry and discovery of
// st, until the test ends, and returns their addresses. Admission keeps
// decisions (and GetReceipt answers valid_until) for cacheTTL.
func StartAdmissionAndLease(t testing.TB, st *stack.Stack, cacheTTL time.Duration) (admAddr, leaseAddr string) {
	t.Helper()
	admAddr = StartAdmission(t, st, cacheTTL, stack.AdmissionDB(t), nil)
	return admAddr, StartLease(t, st, admAddr)
}

// StartAdmission runs an admission replica over the database at dbURL
// (replicas started over one database share its receipts) against the
// registry and discovery of st, with its configuration changed by edit
// (nil: unchanged), until the test ends, and returns its address.
func StartAdmission(t testing.TB, st *stack.Stack, cacheTTL time.Duration, dbURL string, edit func(*admission.Config)) string {
	t.Helper()
	cfg := st.AdmissionConfig(t)
	cfg.CacheTTL = cacheTTL
	return st.StartAdmission(t, cfg, dbURL, edit)
}

// StartLease runs a lease service with its own database, reading receipts
// from the admission at admAddr, until the test ends, and returns its
// address.
func StartLease(t testing.TB, st *stack.Stack, admAddr string) string {
	t.Helper()
	return st.StartLease(t, st.LeaseConfig(t, admAddr, ""), stack.LeaseDB(t), nil)
}

// ShipmentArgs are the arguments of every call here.
var ShipmentArgs = []byte(`{"shipment_id":"S-1"}`)

// Check asks admission as who for shipment_status at generation with args.
func (w *World) Check(t testing.TB, who string, generation int64, args []byte) *admissionv1.CheckResponse {
	t.Helper()
	resp, err := w.Adm[who].Check(ctxFor(t), &admissionv1.CheckRequest{ToolId: toolID, Generation: generation,
		DescriptorDigest: w.Digest, Arguments: args, Mode: admissionv1.Mode_MODE_AUTONOMOUS, AudienceClass: class})
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	return resp
}

// Allow polls until alice's Check at generation is ALLOW and returns it.
func (w *World) Allow(t testing.TB, generation int64) *admissionv1.CheckResponse {
	t.Helper()
	var resp *admissionv1.CheckResponse
	servicetest.Eventually(t, 30*time.Second, "an ALLOW from admission", func() bool {
		resp = w.Check(t, "alice", generation, ShipmentArgs)
		return resp.GetDecision() == admissionv1.Decision_DECISION_ALLOW
	})
	return resp
}

// Issue asks the lease service as who for a lease on receipt, for
// ShipmentArgs, bound to the world's holder key.
func (w *World) Issue(t testing.TB, who, receipt string) (*leasev1.IssueResponse, error) {
	return w.issue(t, who, &leasev1.IssueRequest{ReceiptId: receipt})
}

// IssueSigned asks the lease service as who for a lease on a signed
// receipt (CheckResponse.signed_receipt), for ShipmentArgs, bound to the
// world's holder key.
func (w *World) IssueSigned(t testing.TB, who, signed string) (*leasev1.IssueResponse, error) {
	return w.issue(t, who, &leasev1.IssueRequest{SignedReceipt: signed})
}

// issue completes req (arguments, holder key, audience) and sends it as
// who.
func (w *World) issue(t testing.TB, who string, req *leasev1.IssueRequest) (*leasev1.IssueResponse, error) {
	digest, err := lease.ArgumentDigest(ShipmentArgs)
	if err != nil {
		t.Fatal(err)
	}
	req.ArgumentDigest, req.HolderPublicKey, req.Audience = digest, w.JWK, Audience
	return w.Lease[who].Issue(ctxFor(t), req)
}

// Verify presents the lease as alice with a fresh holder proof.
func (w *World) Verify(t testing.TB, iss *leasev1.IssueResponse) *leasev1.VerifyResponse {
	t.Helper()
	resp, err := w.Lease["alice"].Verify(ctxFor(t), w.VerifyRequest(t, iss))
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	return resp
}

// VerifyRequest is the Verify of the lease with a fresh holder proof, for
// a test that expects Verify to fail.
func (w *World) VerifyRequest(t testing.TB, iss *leasev1.IssueResponse) *leasev1.VerifyRequest {
	t.Helper()
	c := iss.GetClaims()
	proof, err := lease.NewProof(w.Holder, lease.Claims{ID: c.GetLeaseId(), ArgumentDigest: c.GetArgumentDigest(), Audience: c.GetAudience()}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return &leasev1.VerifyRequest{Token: iss.GetToken(), Proof: proof, Audience: c.GetAudience(), ArgumentDigest: c.GetArgumentDigest(), ToolId: toolID}
}

// CodeReason returns the gRPC code and ErrorInfo reason of err.
func CodeReason(err error) (codes.Code, string) {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return st.Code(), info.GetReason()
		}
	}
	return st.Code(), ""
}

// NewLeaseClient returns a client of the lease service at addr presenting
// who's user token (tenant-a, group readers).
func NewLeaseClient(t testing.TB, st *stack.Stack, addr, who string) leasev1.LeaseServiceClient {
	t.Helper()
	return leasev1.NewLeaseServiceClient(st.Auth.Dial(t, addr, st.Auth.User(t, who, tenant, "readers")))
}

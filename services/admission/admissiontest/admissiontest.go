// Package admissiontest starts the real AdmissionService for tests and
// benchmarks outside the admission module: the gRPC API, the decision cache
// (L1, and Redis as L2 when asked), the argument validator and the receipt
// writer on a fresh Postgres database, ALLOW receipts signed with keys in
// memory (as cmd/admission without --receipt-key-file), served by
// platform/rpcserver with real token verification and the grpc.health.v1
// service. Only the registry and discovery behind the replica are
// replaced, by an in-memory world that answers the replica's reads (the
// heads are kept fresh).
//
// The world is seed 004's: tenant demo-a, audience class demo-a.readers
// reading server logistics at generation 7, policy epoch 5, and user alice
// granted shipment:read and shipment:write there. Its tools:
//
//   - logistics.shipment_status: read-only, scope shipment:read, input
//     {"shipment_id": string} required;
//   - logistics.cancel_shipment: destructive, scope shipment:write,
//     confirmation always;
//   - logistics.draft_label: enabled but its descriptor is not approved
//     (UNREVIEWED, never visible).
package admissiontest

import (
	"context"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/keyring"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/postgres"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/redisclient"
	"github.com/toolcrib/toolcrib/platform/redistest"
	"github.com/toolcrib/toolcrib/platform/rpcserver"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/admission/internal/args"
	"github.com/toolcrib/toolcrib/services/admission/internal/cache"
	"github.com/toolcrib/toolcrib/services/admission/internal/decision"
	"github.com/toolcrib/toolcrib/services/admission/internal/grpcapi"
	"github.com/toolcrib/toolcrib/services/admission/internal/receipts"
	"github.com/toolcrib/toolcrib/services/admission/internal/replica"
	"github.com/toolcrib/toolcrib/services/admission/migrations"
)

// The world's names.
const (
	Tenant     = "demo-a"
	Class      = "demo-a.readers"
	Server     = "logistics"
	User       = "alice"
	Generation = 7
	Epoch      = 5
	StatusTool = "logistics.shipment_status"
	CancelTool = "logistics.cancel_shipment"
	DraftTool  = "logistics.draft_label"
	// ConditionalGroup holds shipment:read on Class only under
	// ConditionalGrant; ConditionalUser is in it and holds nothing else.
	ConditionalGroup = "conditional-readers"
	ConditionalUser  = "carl"
	// ConditionalGrant reads the arguments, the principal and the request
	// like the examples.
	ConditionalGrant = `args.shipment_id.startsWith("S-") && principal.tenant == "demo-a" && request.mode == "AUTONOMOUS"`
)

// Digests of the world's descriptors.
var (
	StatusDigest = "sha256:" + strings.Repeat("a", 64)
	CancelDigest = "sha256:" + strings.Repeat("b", 64)
	DraftDigest  = "sha256:" + strings.Repeat("d", 64)
)

// Options shapes the service.
type Options struct {
	// Redis makes Redis the cache's L2 (own key prefix).
	Redis bool
	// L1Size is the in-process cache's size; 0 for 10,000.
	L1Size int
	// SkipL1 makes every cache lookup miss L1 (answered by Redis).
	SkipL1 bool
	// SourceDelay is added to every read of the in-memory registry and
	// discovery (a network round trip's stand-in); 0 for none.
	SourceDelay time.Duration
	// Register registers more services on the same gRPC server, behind the
	// same interceptors as AdmissionService: a benchmark's floor handler
	// (a Check-shaped method that does no work). Only tests and benchmarks
	// set it; cmd/admission has no such hook.
	Register func(*grpc.Server)
}

// Service is a running admission service.
type Service struct {
	// Addr is its gRPC address (AdmissionService and grpc.health.v1).
	Addr string
	// Auth mints tokens its verifier accepts.
	Auth *servicetest.Auth
	// Redis is the L2's client (nil without Options.Redis), for a
	// benchmark's bare Redis arm.
	Redis *redisclient.Client
	// PostgresURL is the receipts database's URL.
	PostgresURL string
	// Receipts is the writer Check stores its receipts with, for a
	// benchmark's floor that stores one per call as Check does.
	Receipts *receipts.Writer
	// CacheAnswers counts the cache's answers by level ("miss", "l1", "l2").
	CacheAnswers func() map[string]int64

	heads *replica.Heads
	world *World // StartWorld's
}

// Start runs the service until the test ends.
func Start(t testing.TB, o Options) *Service {
	t.Helper()
	return start(t, o, &world{delay: o.SourceDelay}, nil)
}

// sources is what the replica reads behind its heads.
type sources interface {
	replica.Policies
	replica.Catalog
	replica.Reviews
	grpcapi.PointerSource
}

// start runs the service over src. Without freshness the streams beat
// every second; with it, freshness is each stream's newest heartbeat.
func start(t testing.TB, o Options, src sources, freshness func() changelog.Freshness) *Service {
	t.Helper()
	auth := servicetest.NewAuth(t)
	v, err := principal.LoadVerifier(auth.JWKSPath, principal.VerifierConfig{Issuer: servicetest.Issuer,
		Audience: servicetest.Audience, PlatformTenant: servicetest.PlatformTenant, AdminGroup: servicetest.AdminGroup, ServiceGroup: servicetest.ServiceGroup,
		ConfirmerGroup: servicetest.ConfirmerGroup})
	if err != nil {
		t.Fatal(err)
	}
	url := pgtest.NewDatabase(t, pgtest.Schema{Name: "admission", Sets: []postgres.Set{migrations.Set()}})
	pool, err := postgres.Open(context.Background(), url, "admission")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	heads := replica.NewHeads(5*time.Second, nil)
	if freshness != nil {
		heads.Follow(changelog.RegistryHead, freshness)
		heads.Follow(changelog.DiscoveryHead, freshness)
	}
	copts := cache.Options{L1Size: o.L1Size, SkipL1: o.SkipL1}
	if copts.L1Size == 0 {
		copts.L1Size = 10_000
	}
	if o.Redis {
		copts.Redis = redistest.NewClient(t)
	}
	c := cache.New(copts)
	rw := receipts.New(pool, receipts.Options{})
	// ALLOWs are signed as cmd/admission signs them without a key file
	// (keys in memory), so a benchmark measures the signing too.
	ring, err := keyring.NewRing(context.Background(), &keyring.Memory{}, keyring.Options{Lifetime: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	api := grpcapi.New(grpcapi.Options{Signing: &grpcapi.Signing{Ring: ring, MaxLifetime: 5 * time.Second}, Heads: heads, Material: replica.NewMaterial(src, src, src, 1000), Pointers: src, Cache: c,
		Validator: args.NewValidator(100), Limits: args.DefaultLimits, Receipts: rw, Replica: "admissiontest:1", Confirmers: v})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	srv, err := rpcserver.New(rpcserver.Options{
		Service: "admission", HealthNames: []string{admissionv1.AdmissionService_ServiceDesc.ServiceName},
		ListenAddr: addr, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), CheckInterval: 50 * time.Millisecond, ShutdownTimeout: 2 * time.Second,
		Unary:  []grpc.UnaryServerInterceptor{v.UnaryServerInterceptor()},
		Stream: []grpc.StreamServerInterceptor{v.StreamServerInterceptor()},
		Register: func(s *grpc.Server) {
			admissionv1.RegisterAdmissionServiceServer(s, api)
			if o.Register != nil {
				o.Register(s)
			}
		},
		StreamWorkers: 64, // as cmd/admission
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	beat := func() {
		heads.Heartbeat(changelog.RegistryHead)
		heads.Heartbeat(changelog.DiscoveryHead)
	}
	beat()
	wg.Add(3)
	go func() { defer wg.Done(); _ = srv.Run(ctx) }()
	go func() { defer wg.Done(); _ = rw.Run(ctx) }()
	go func() { // the streams' heartbeats
		defer wg.Done()
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				beat()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		_ = rw.Close()
		c.Close()
	})
	for deadline := time.Now().Add(10 * time.Second); !srv.Serving(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("admissiontest: the server never reported SERVING")
		}
	}
	answers := func() map[string]int64 {
		out := map[string]int64{}
		for l, n := range c.Stats().Hits {
			out[l.String()] = n
		}
		return out
	}
	return &Service{Addr: addr, Auth: auth, Redis: copts.Redis, PostgresURL: url, Receipts: rw, CacheAnswers: answers, heads: heads}
}

// world is the in-memory registry and discovery.
type world struct{ delay time.Duration }

func (w *world) wait(ctx context.Context) error {
	if w.delay <= 0 {
		return nil
	}
	select {
	case <-time.After(w.delay):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

var policy = replica.Policy{Tenant: Tenant, Epoch: Epoch,
	Grants: []decision.Grant{{Subject: User, Scopes: []string{"shipment:read", "shipment:write"}, Classes: []string{Class}},
		// The conditional group's grant (the conditional benchmark line):
		// the same scope and class under a condition over the arguments,
		// the principal and the request.
		decision.GrantOf("", ConditionalGroup, []string{"shipment:read"}, []string{Class}, ConditionalGrant)},
	Classes: map[string][]string{Class: {Server}}}

func (w *world) Current(ctx context.Context, tenant string) (replica.Policy, error) {
	if err := w.wait(ctx); err != nil {
		return replica.Policy{}, err
	}
	if tenant != Tenant {
		return replica.Policy{}, replica.ErrNotFound
	}
	return policy, nil
}

func (w *world) PolicyAt(ctx context.Context, tenant string, epoch int64) (replica.Policy, error) {
	p, err := w.Current(ctx, tenant)
	if err == nil && epoch != Epoch {
		return replica.Policy{}, replica.ErrNotKept
	}
	return p, err
}

var generation = &replica.Generation{ServerID: Server, Class: Class, Generation: Generation,
	State: catalogv1.DiscoveryState_DISCOVERY_STATE_SNAPSHOT_PROVEN,
	Tools: map[string]*replica.ToolEntry{
		StatusTool: {ToolID: StatusTool, Name: "shipment_status", Title: "Shipment status",
			Description: "Query the current status of a shipment.", DescriptorDigest: StatusDigest,
			InputSchemaDigest: "sha256:" + strings.Repeat("1", 64),
			InputSchema:       []byte(`{"type":"object","properties":{"shipment_id":{"type":"string"}},"required":["shipment_id"]}`)},
		CancelTool: {ToolID: CancelTool, Name: "cancel_shipment", Title: "Cancel shipment",
			Description: "Cancel a shipment that has not left the warehouse.", DescriptorDigest: CancelDigest,
			InputSchemaDigest: "sha256:" + strings.Repeat("2", 64),
			InputSchema:       []byte(`{"type":"object","properties":{"shipment_id":{"type":"string"}},"required":["shipment_id"]}`)},
		DraftTool: {ToolID: DraftTool, Name: "draft_label", Description: "Draft a shipping label.", DescriptorDigest: DraftDigest,
			InputSchemaDigest: "sha256:" + strings.Repeat("3", 64), InputSchema: []byte(`{"type":"object"}`)},
	}}

func (w *world) Generation(ctx context.Context, server, class string, gen int64) (*replica.Generation, error) {
	if err := w.wait(ctx); err != nil {
		return nil, err
	}
	if server != Server || class != Class || gen != Generation {
		return nil, replica.ErrNotFound
	}
	return generation, nil
}

func (w *world) Review(ctx context.Context, _ string, _ int64, _, toolID, digest string) (decision.Review, error) {
	if err := w.wait(ctx); err != nil {
		return decision.Review{}, err
	}
	switch {
	case toolID == StatusTool && digest == StatusDigest:
		return decision.Review{Known: true, Enabled: true, Trust: registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY, Approved: &decision.Contract{
			Effect: catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY, Scope: "shipment:read"}}, nil
	case toolID == CancelTool && digest == CancelDigest:
		return decision.Review{Known: true, Enabled: true, Trust: registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY, Approved: &decision.Contract{
			Effect: catalogv1.EffectClass_EFFECT_CLASS_DESTRUCTIVE, Scope: "shipment:write",
			Confirmation: registryv1.Confirmation_CONFIRMATION_ALWAYS}}, nil
	case toolID == DraftTool:
		return decision.Review{Known: true, Enabled: true}, nil
	}
	return decision.Review{}, nil
}

func (w *world) Pointer(ctx context.Context, server, class string) (replica.Pointer, error) {
	if err := w.wait(ctx); err != nil {
		return replica.Pointer{}, err
	}
	if server != Server || class != Class {
		return replica.Pointer{}, replica.ErrNotFound
	}
	return replica.Pointer{ServerID: Server, Class: Class, Tenant: Tenant, Generation: Generation,
		FreshUntil: time.Now().Add(24 * time.Hour), Revision: 1}, nil
}

// InputSchema is the input schema of the world's tool toolID (nil for a
// tool the world lacks): for a peer engine given the same world.
func InputSchema(toolID string) []byte {
	if e := generation.Tools[toolID]; e != nil {
		return e.InputSchema
	}
	return nil
}

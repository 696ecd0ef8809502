package registrytest

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/canonical"
	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/secretref"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/registry"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// Registry is a running registry under test.
type Registry struct {
	// Addr is its gRPC address.
	Addr string
	// Auth mints tokens it accepts.
	Auth *servicetest.Auth
	// Discovery is the fake discovery it follows; nil with NoDiscovery.
	Discovery *Discovery
	// PostgresURL is its database.
	PostgresURL string
	// Config is the configuration it runs with.
	Config registry.Config
	// Drain starts the registry's shutdown (as a signal does); the test's
	// cleanup still waits for Run to return.
	Drain func()
}

// Options change how [Start] runs the registry.
type Options struct {
	// NoDiscovery runs without following a discovery service.
	NoDiscovery bool
	// Configure edits the configuration before start.
	Configure func(*registry.Config)
}

// Start runs a registry on a fresh database until the test ends and waits
// until it is SERVING.
func Start(t testing.TB, opts Options) *Registry {
	t.Helper()
	r := &Registry{Auth: servicetest.NewAuth(t)}
	r.PostgresURL = pgtest.NewDatabase(t, pgtest.Schema{Name: registry.Schema, Sets: registry.Migrations()})
	cfg := registry.Config{
		Common:          r.Auth.Common(t, r.PostgresURL, false, nil),
		WatchHeartbeat:  100 * time.Millisecond,
		WatchRetention:  24 * time.Hour,
		WatchKeep:       10_000,
		CompactInterval: time.Minute,
		// The default egress policy (no loopback); env: references with the
		// default prefix and the fixtures' LOGISTICS_, file: references in
		// /run/secrets. Configure changes either.
		Secrets: secretref.Config{Dirs: "/run/secrets", EnvPrefixes: secretref.DefaultEnvPrefix + ",LOGISTICS_"},
	}
	if !opts.NoDiscovery {
		r.Discovery = NewDiscovery(t, r.Auth)
		cfg.DiscoveryAddr = r.Discovery.Addr
	}
	if opts.Configure != nil {
		opts.Configure(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("registrytest: configuration: %v", err)
	}
	r.Config = cfg
	drainCtx, drain := context.WithCancel(context.Background())
	t.Cleanup(drain)
	r.Drain = drain
	r.Addr = servicetest.Start(t, func(ctx context.Context, listening func(string)) error {
		c := cfg
		c.Listening = listening
		ctx, stop := context.WithCancel(ctx)
		defer stop()
		go func() {
			select {
			case <-drainCtx.Done():
				stop()
			case <-ctx.Done():
			}
		}()
		return registry.Run(ctx, c)
	})
	return r
}

// Client returns a client presenting token (none when empty).
func (r *Registry) Client(t testing.TB, token string) registryv1.RegistryServiceClient {
	return registryv1.NewRegistryServiceClient(servicetest.Dial(t, r.Addr, token))
}

// Admin returns a client with a platform-admin token.
func (r *Registry) Admin(t testing.TB) registryv1.RegistryServiceClient {
	return r.Client(t, r.Auth.Admin(t))
}

// WaitTool polls GetTool until ok accepts the tool, failing the test after
// 10 seconds.
func (r *Registry) WaitTool(t testing.TB, id string, ok func(*registryv1.Tool) bool) *registryv1.Tool {
	t.Helper()
	c := r.Admin(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := c.GetTool(context.Background(), &registryv1.GetToolRequest{ToolId: id})
		if err == nil && ok(resp.GetTool()) {
			return resp.GetTool()
		}
		if time.Now().After(deadline) {
			t.Fatalf("tool %s did not reach the expected state within 10s (last: %v, %v)", id, resp.GetTool(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Descriptor returns a tool descriptor as discovery would record it: raw is
// the MCP tool JSON, the digest its JCS sha256.
func Descriptor(serverID, raw string) *catalogv1.ToolDescriptor {
	d, err := canonical.Digest([]byte(raw))
	if err != nil {
		panic(fmt.Sprintf("registrytest: descriptor JSON: %v", err))
	}
	var name string
	if i := strings.Index(raw, `"name":"`); i >= 0 {
		name, _, _ = strings.Cut(raw[i+len(`"name":"`):], `"`)
	}
	return &catalogv1.ToolDescriptor{ToolId: serverID + "." + name, Name: name, DescriptorDigest: d, Raw: []byte(raw)}
}

// Tool returns a descriptor of a tool with a description and, when given,
// an outputSchema requiring those properties.
func Tool(serverID, name, description string, outputRequired ...string) *catalogv1.ToolDescriptor {
	raw := fmt.Sprintf(`{"name":%q,"description":%q,"inputSchema":{"type":"object"}`, name, description)
	if len(outputRequired) > 0 {
		quoted := make([]string, len(outputRequired))
		for i, r := range outputRequired {
			quoted[i] = fmt.Sprintf("%q", r)
		}
		raw += `,"outputSchema":{"type":"object","required":[` + strings.Join(quoted, ",") + `]}`
	}
	return Descriptor(serverID, raw+"}")
}

type pairKey struct{ server, class string }

type genKey struct {
	pairKey
	gen int64
}

// Discovery is a fake DiscoveryService on a loopback listener. It
// authenticates callers like the real one, serves Watch from an in-memory
// change log through the shared Watch server ([changelog.Server], so it
// passes the Watch contract suite, package watchtest), and GetSnapshot and
// GetActiveSnapshot from what the test commits; every other RPC is
// UNIMPLEMENTED.
type Discovery struct {
	discoveryv1.UnimplementedDiscoveryServiceServer
	// Addr is its gRPC address.
	Addr string

	// Heartbeat is the Watch heartbeat interval (50 ms); set before use.
	Heartbeat time.Duration

	log       *changelog.Memory
	drain     chan struct{}
	mu        sync.Mutex
	gens      map[pairKey]int64
	snapshots map[genKey]*catalogv1.Snapshot
	active    map[pairKey]*discoveryv1.ActivePointer
	cut       chan struct{}
	watches   []int64
	auth      []string
}

// NewDiscovery serves a fake discovery, accepting the tokens auth mints,
// until the test ends.
func NewDiscovery(t testing.TB, auth *servicetest.Auth) *Discovery {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &Discovery{Addr: lis.Addr().String(), gens: map[pairKey]int64{}, snapshots: map[genKey]*catalogv1.Snapshot{},
		active: map[pairKey]*discoveryv1.ActivePointer{}, cut: make(chan struct{}),
		log: changelog.NewMemory(), drain: make(chan struct{}), Heartbeat: 50 * time.Millisecond}
	v := auth.Verifier(t)
	s := grpc.NewServer(grpc.ChainUnaryInterceptor(d.recordUnary, v.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(d.recordStream, v.StreamServerInterceptor()))
	discoveryv1.RegisterDiscoveryServiceServer(s, d)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return d
}

// Commit makes a new generation of (server, class) with tools active and
// returns its generation and discovery revision.
func (d *Discovery) Commit(serverID, class string, tools ...*catalogv1.ToolDescriptor) (gen, rev int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := pairKey{serverID, class}
	d.gens[k]++
	gen = d.gens[k]
	snap := &catalogv1.Snapshot{Schema: "toolCatalogSnapshot.v1", ServerId: serverID, AudienceClass: class, Generation: gen,
		Tools: tools, State: catalogv1.DiscoveryState_DISCOVERY_STATE_ELIGIBLE,
		SnapshotDigest: canonical.DigestBytes(fmt.Appendf(nil, "%s/%s/%d", serverID, class, gen))}
	d.snapshots[genKey{k, gen}] = snap
	return gen, d.move(k, gen, discoveryv1.PointerState_POINTER_STATE_ACTIVE)
}

// Close closes the pointer of (server, class), as a rollback with no fresh
// generation does, and returns the move's revision.
func (d *Discovery) Close(serverID, class string) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := pairKey{serverID, class}
	return d.move(k, d.gens[k], discoveryv1.PointerState_POINTER_STATE_CLOSED)
}

func (d *Discovery) move(k pairKey, gen int64, state discoveryv1.PointerState) int64 {
	tenant, _, _ := strings.Cut(k.class, ".")
	head, _ := d.log.Head(context.Background())
	p := &discoveryv1.ActivePointer{ServerId: k.server, AudienceClass: k.class, TenantId: tenant, Generation: gen, State: state,
		Revision: head + 1, SnapshotState: catalogv1.DiscoveryState_DISCOVERY_STATE_ELIGIBLE}
	d.active[k] = p
	payload, err := proto.Marshal(&discoveryv1.PointerChange{Pointer: p})
	if err != nil {
		panic(err) // a message built here always marshals
	}
	return d.log.Append("pointer", payload, []string{tenant}).Revision
}

// Compact forgets the moves up to and including revision through: a Watch
// resuming from before it fails with REVISION_COMPACTED.
func (d *Discovery) Compact(through int64) { d.log.Compact(through) }

// Drain ends every Watch stream as a draining discovery does, and refuses
// new ones.
func (d *Discovery) Drain() {
	d.mu.Lock()
	defer d.mu.Unlock()
	select {
	case <-d.drain:
	default:
		close(d.drain)
	}
}

// Forget drops one generation's snapshot, as retention would: GetSnapshot
// then answers NOT_FOUND.
func (d *Discovery) Forget(serverID, class string, gen int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.snapshots, genKey{pairKey{serverID, class}, gen})
}

// Disconnect ends every open Watch stream with UNAVAILABLE.
func (d *Discovery) Disconnect() {
	d.mu.Lock()
	defer d.mu.Unlock()
	close(d.cut)
	d.cut = make(chan struct{})
}

// Pause holds back moves from open and new Watch streams (heartbeats go
// on, reporting only what was sent) until [Discovery.Resume].
func (d *Discovery) Pause() { d.log.Hold() }

// Resume sends the moves held back by [Discovery.Pause].
func (d *Discovery) Resume() { d.log.Release() }

// Watches returns the from_revision of every Watch call so far.
func (d *Discovery) Watches() []int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.watches)
}

// Authorizations returns the `authorization` metadata of every call.
func (d *Discovery) Authorizations() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.auth)
}

func (d *Discovery) record(ctx context.Context) {
	md, _ := metadata.FromIncomingContext(ctx)
	d.auth = append(d.auth, strings.Join(md.Get("authorization"), ","))
}

func (d *Discovery) recordUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	d.mu.Lock()
	d.record(ctx)
	d.mu.Unlock()
	return h(ctx, req)
}

func (d *Discovery) recordStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	d.mu.Lock()
	d.record(ss.Context())
	d.mu.Unlock()
	return h(srv, ss)
}

// Watch implements DiscoveryService.Watch with the shared Watch server;
// [Discovery.Disconnect] ends it with UNAVAILABLE.
func (d *Discovery) Watch(req *discoveryv1.WatchRequest, stream discoveryv1.DiscoveryService_WatchServer) error {
	p, err := principal.Require(stream.Context())
	if err != nil {
		return err
	}
	viewer, err := changelog.ViewerOf(p)
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.watches = append(d.watches, req.GetFromRevision())
	cut := d.cut
	d.mu.Unlock()
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	go func() {
		select {
		case <-cut:
			cancel()
		case <-ctx.Done():
		}
	}()
	srv := changelog.Server{Feed: d.log, Heartbeat: d.Heartbeat, Draining: d.drain, Relist: "GetActiveSnapshot"}
	err = srv.Serve(ctx, viewer, req.GetFromRevision(), func(ev changelog.Event) error {
		select {
		case <-cut: // nothing is sent once Disconnect returned
			return context.Canceled
		default:
		}
		if ev.Entry == nil {
			return stream.Send(&discoveryv1.WatchResponse{Event: &discoveryv1.WatchResponse_Heartbeat{
				Heartbeat: &catalogv1.Heartbeat{Revision: ev.Head, SentAt: timestamppb.New(ev.SentAt)}}})
		}
		m := &discoveryv1.PointerChange{}
		if err := proto.Unmarshal(ev.Entry.Payload, m); err != nil {
			return err
		}
		m.Revision = ev.Entry.Revision
		return stream.Send(&discoveryv1.WatchResponse{Event: &discoveryv1.WatchResponse_Change{Change: m}})
	})
	select {
	case <-cut:
		return status.Error(codes.Unavailable, "registrytest: discovery disconnected the stream")
	default:
	}
	return err
}

// GetSnapshot implements DiscoveryService.GetSnapshot.
func (d *Discovery) GetSnapshot(ctx context.Context, req *discoveryv1.GetSnapshotRequest) (*discoveryv1.GetSnapshotResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.snapshots[genKey{pairKey{req.GetServerId(), req.GetAudienceClass()}, req.GetGeneration()}]
	if !ok {
		return nil, apierror.NotFound("snapshot", fmt.Sprintf("%s/%s/%d", req.GetServerId(), req.GetAudienceClass(), req.GetGeneration())).GRPCStatus().Err()
	}
	return &discoveryv1.GetSnapshotResponse{Snapshot: s}, nil
}

// GetActiveSnapshot implements DiscoveryService.GetActiveSnapshot.
func (d *Discovery) GetActiveSnapshot(ctx context.Context, req *discoveryv1.GetActiveSnapshotRequest) (*discoveryv1.GetActiveSnapshotResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := pairKey{req.GetServerId(), req.GetAudienceClass()}
	p, ok := d.active[k]
	if !ok {
		return nil, apierror.NotFound("pointer", k.server+"/"+k.class).GRPCStatus().Err()
	}
	resp := &discoveryv1.GetActiveSnapshotResponse{Pointer: p}
	if p.GetState() == discoveryv1.PointerState_POINTER_STATE_ACTIVE {
		resp.Snapshot = d.snapshots[genKey{k, p.GetGeneration()}]
	}
	return resp, nil
}

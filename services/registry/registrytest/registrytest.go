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

	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/canonical"
	"github.com/toolcrib/toolcrib/platform/pgtest"
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
		r.Discovery = NewDiscovery(t)
		cfg.DiscoveryAddr = r.Discovery.Addr
	}
	if opts.Configure != nil {
		opts.Configure(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("registrytest: configuration: %v", err)
	}
	r.Config = cfg
	r.Addr = servicetest.Start(t, func(ctx context.Context, listening func(string)) error {
		c := cfg
		c.Listening = listening
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

// Discovery is a fake DiscoveryService on a loopback listener. It serves
// Watch (from_revision semantics, REVISION_COMPACTED and heartbeats as the
// API describes), GetSnapshot and GetActiveSnapshot from what the test
// commits; every other RPC is UNIMPLEMENTED.
type Discovery struct {
	discoveryv1.UnimplementedDiscoveryServiceServer
	// Addr is its gRPC address.
	Addr string

	mu        sync.Mutex
	moves     []*discoveryv1.PointerChange
	head      int64
	compacted int64
	gens      map[pairKey]int64
	snapshots map[genKey]*catalogv1.Snapshot
	active    map[pairKey]*discoveryv1.ActivePointer
	changed   chan struct{}
	cut       chan struct{}
	watches   []int64
	auth      []string
	paused    bool
}

// NewDiscovery serves a fake discovery until the test ends.
func NewDiscovery(t testing.TB) *Discovery {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &Discovery{Addr: lis.Addr().String(), gens: map[pairKey]int64{}, snapshots: map[genKey]*catalogv1.Snapshot{},
		active: map[pairKey]*discoveryv1.ActivePointer{}, changed: make(chan struct{}), cut: make(chan struct{})}
	s := grpc.NewServer()
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
	d.head++
	p := &discoveryv1.ActivePointer{ServerId: k.server, AudienceClass: k.class, Generation: gen, State: state, Revision: d.head,
		SnapshotState: catalogv1.DiscoveryState_DISCOVERY_STATE_ELIGIBLE}
	d.active[k] = p
	d.moves = append(d.moves, &discoveryv1.PointerChange{Revision: d.head, Pointer: p})
	close(d.changed)
	d.changed = make(chan struct{})
	return d.head
}

// Compact forgets the moves up to and including revision through: a Watch
// resuming from before it fails with REVISION_COMPACTED.
func (d *Discovery) Compact(through int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.compacted = max(d.compacted, through)
	d.moves = slices.DeleteFunc(d.moves, func(m *discoveryv1.PointerChange) bool { return m.GetRevision() <= through })
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
func (d *Discovery) Pause() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.paused = true
}

// Resume sends the moves held back by [Discovery.Pause].
func (d *Discovery) Resume() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.paused = false
	close(d.changed)
	d.changed = make(chan struct{})
}

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

// Watch implements DiscoveryService.Watch.
func (d *Discovery) Watch(req *discoveryv1.WatchRequest, stream discoveryv1.DiscoveryService_WatchServer) error {
	d.mu.Lock()
	d.record(stream.Context())
	d.watches = append(d.watches, req.GetFromRevision())
	cursor := req.GetFromRevision()
	if cursor != 0 && cursor < d.compacted {
		d.mu.Unlock()
		return apierror.FailedPrecondition("REVISION_COMPACTED", fmt.Sprintf("moves after %d are no longer kept", cursor)).GRPCStatus().Err()
	}
	if cursor == 0 {
		cursor = d.compacted
	}
	cut := d.cut
	d.mu.Unlock()
	heartbeat := time.NewTicker(50 * time.Millisecond)
	defer heartbeat.Stop()
	for {
		d.mu.Lock()
		var pending []*discoveryv1.PointerChange
		for _, m := range d.moves {
			if m.GetRevision() > cursor && !d.paused {
				pending = append(pending, m)
			}
		}
		changed := d.changed
		d.mu.Unlock()
		for _, m := range pending {
			if err := stream.Send(&discoveryv1.WatchResponse{Event: &discoveryv1.WatchResponse_Change{Change: m}}); err != nil {
				return err
			}
			cursor = m.GetRevision()
		}
		select {
		case <-cut:
			return status.Error(codes.Unavailable, "registrytest: discovery disconnected the stream")
		case <-stream.Context().Done():
			return stream.Context().Err()
		case <-changed:
		case <-heartbeat.C:
			if err := stream.Send(&discoveryv1.WatchResponse{Event: &discoveryv1.WatchResponse_Heartbeat{
				Heartbeat: &catalogv1.Heartbeat{Revision: cursor}}}); err != nil {
				return err
			}
		}
	}
}

// GetSnapshot implements DiscoveryService.GetSnapshot.
func (d *Discovery) GetSnapshot(ctx context.Context, req *discoveryv1.GetSnapshotRequest) (*discoveryv1.GetSnapshotResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.record(ctx)
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
	d.record(ctx)
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

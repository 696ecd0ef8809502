package discoverytest

import (
	"context"
	"net"
	"slices"
	"sort"
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

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/servicetest"
)

// Registry is an in-memory fake of the registry's gRPC API, enough for
// discovery: servers, audience classes, tenants' policy epochs,
// GetBinding(s), UpdateServer and PinIdentities (only to set an empty
// identity pin, like the real registry allows a service principal) and
// Watch. Callers are authenticated like the real
// registry does (tokens of the [servicetest.Auth] it was started with).
// Every change is appended to an in-memory change log served by the shared
// Watch server ([changelog.Server]), so Watch is the real one's: it passes
// the Watch contract suite (package watchtest).
type Registry struct {
	registryv1.UnimplementedRegistryServiceServer

	mu      sync.Mutex
	servers map[string]*registryv1.Server
	classes map[string]*registryv1.AudienceClass
	epochs  map[string]int64
	log     *changelog.Memory
	drain   chan struct{}
	// Heartbeat is the Watch heartbeat interval (200 ms); set before serving.
	Heartbeat time.Duration
	// Tokens are the bearer tokens calls presented, in order.
	tokens []string
	// Unavailable makes every call fail with UNAVAILABLE while true.
	unavailable bool
}

// NewRegistry returns an empty fake registry.
func NewRegistry() *Registry {
	return &Registry{servers: map[string]*registryv1.Server{}, classes: map[string]*registryv1.AudienceClass{},
		epochs: map[string]int64{}, log: changelog.NewMemory(), drain: make(chan struct{}), Heartbeat: 200 * time.Millisecond}
}

// StartRegistry serves a fake registry over real gRPC on a loopback port,
// accepting the tokens auth mints, and returns it with its address; it
// stops when the test ends.
func StartRegistry(t testing.TB, auth *servicetest.Auth) (*Registry, string) {
	t.Helper()
	r := NewRegistry()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	v := auth.Verifier(t)
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(r.record, v.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(r.recordStream, v.StreamServerInterceptor()))
	registryv1.RegisterRegistryServiceServer(srv, r)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return r, lis.Addr().String()
}

func (r *Registry) token(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tokens = append(r.tokens, strings.Join(md.Get("authorization"), ","))
	if r.unavailable {
		return status.Error(codes.Unavailable, "fake registry is down")
	}
	return nil
}

func (r *Registry) record(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := r.token(ctx); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (r *Registry) recordStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := r.token(ss.Context()); err != nil {
		return err
	}
	return h(srv, ss)
}

// Tokens returns the authorization values calls presented so far.
func (r *Registry) Tokens() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.tokens)
}

// SetUnavailable makes every later call fail (true) or succeed (false).
func (r *Registry) SetUnavailable(down bool) {
	r.mu.Lock()
	r.unavailable = down
	r.mu.Unlock()
}

// appendLocked appends c to the change log for the tenants the real
// registry would show it to.
func (r *Registry) appendLocked(c *registryv1.Change) {
	var tenants []string
	switch o := c.GetObject().(type) {
	case *registryv1.Change_AudienceClass:
		tenants = []string{o.AudienceClass.GetTenantId()}
	case *registryv1.Change_Policy:
		tenants = []string{o.Policy.GetTenantId()}
	case *registryv1.Change_Server:
		for _, cl := range r.classes {
			if slices.ContainsFunc(cl.GetServers(), func(s *registryv1.AudienceServer) bool { return s.GetServerId() == o.Server.GetServerId() }) {
				tenants = append(tenants, cl.GetTenantId())
			}
		}
		slices.Sort(tenants)
		tenants = slices.Compact(tenants)
	}
	payload, err := proto.Marshal(c)
	if err != nil {
		panic(err) // a message built here always marshals
	}
	r.log.Append("change", payload, tenants)
}

// revisionLocked is the head of the change log.
func (r *Registry) revisionLocked() int64 {
	rev, _ := r.log.Head(context.Background())
	return rev
}

// Compact forgets the changes up to and including revision through.
func (r *Registry) Compact(through int64) { r.log.Compact(through) }

// Drain ends every Watch stream as a draining registry does, and refuses
// new ones.
func (r *Registry) Drain() {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.drain:
	default:
		close(r.drain)
	}
}

// PutServer creates or replaces a server (version bumped).
func (r *Registry) PutServer(s *registryv1.Server) *registryv1.Server {
	r.mu.Lock()
	defer r.mu.Unlock()
	s = proto.Clone(s).(*registryv1.Server)
	kind := registryv1.ChangeKind_CHANGE_KIND_CREATED
	if old, ok := r.servers[s.GetServerId()]; ok {
		s.Version = old.GetVersion() + 1
		kind = registryv1.ChangeKind_CHANGE_KIND_UPDATED
	} else {
		s.Version = 1
	}
	r.servers[s.GetServerId()] = s
	r.appendLocked(&registryv1.Change{Kind: kind, Object: &registryv1.Change_Server{Server: proto.Clone(s).(*registryv1.Server)}})
	return proto.Clone(s).(*registryv1.Server)
}

// GetServerRecord returns the stored server.
func (r *Registry) GetServerRecord(id string) *registryv1.Server {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.servers[id]; ok {
		return proto.Clone(s).(*registryv1.Server)
	}
	return nil
}

// Class returns a copy of a stored audience class; nil when unknown.
func (r *Registry) Class(name string) *registryv1.AudienceClass {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.classes[name]; ok {
		return proto.Clone(c).(*registryv1.AudienceClass)
	}
	return nil
}

// PutClass creates or replaces an audience class and bumps its tenant's
// epoch, like the real registry, and returns the revision of the bump.
func (r *Registry) PutClass(c *registryv1.AudienceClass) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	c = proto.Clone(c).(*registryv1.AudienceClass)
	kind := registryv1.ChangeKind_CHANGE_KIND_CREATED
	if old, ok := r.classes[c.GetName()]; ok {
		c.Version = old.GetVersion() + 1
		kind = registryv1.ChangeKind_CHANGE_KIND_UPDATED
	} else {
		c.Version = 1
	}
	r.classes[c.GetName()] = c
	r.appendLocked(&registryv1.Change{Kind: kind, Object: &registryv1.Change_AudienceClass{AudienceClass: proto.Clone(c).(*registryv1.AudienceClass)}})
	r.bumpLocked(c.GetTenantId(), registryv1.PolicyChangeCause_POLICY_CHANGE_CAUSE_AUDIENCE_CLASS)
	return r.revisionLocked()
}

// AddTenant creates a tenant at policy epoch 1 (no-op when it exists).
func (r *Registry) AddTenant(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.epochs[id]; !ok {
		r.epochs[id] = 1
	}
}

// Epoch returns a tenant's policy epoch.
func (r *Registry) Epoch(tenant string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.epochs[tenant]
}

// BumpEpoch raises a tenant's policy epoch (as a grant change would) and
// returns it.
func (r *Registry) BumpEpoch(tenant string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bumpLocked(tenant, registryv1.PolicyChangeCause_POLICY_CHANGE_CAUSE_GRANT)
}

func (r *Registry) bumpLocked(tenant string, cause registryv1.PolicyChangeCause) int64 {
	if r.epochs[tenant] == 0 {
		r.epochs[tenant] = 1
	}
	r.epochs[tenant]++
	r.appendLocked(&registryv1.Change{Kind: registryv1.ChangeKind_CHANGE_KIND_UPDATED,
		Object: &registryv1.Change_Policy{Policy: changelog.NewPolicyChange(tenant, r.epochs[tenant], cause)}})
	return r.epochs[tenant]
}

// GetServer implements the RPC.
func (r *Registry) GetServer(_ context.Context, req *registryv1.GetServerRequest) (*registryv1.GetServerResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.servers[req.GetServerId()]
	if !ok {
		return nil, apierror.NotFound("server", req.GetServerId())
	}
	return &registryv1.GetServerResponse{Server: proto.Clone(s).(*registryv1.Server)}, nil
}

// ListServers implements the RPC (one page).
func (r *Registry) ListServers(context.Context, *registryv1.ListServersRequest) (*registryv1.ListServersResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	resp := &registryv1.ListServersResponse{Revision: r.revisionLocked()}
	for _, s := range r.servers {
		resp.Servers = append(resp.Servers, proto.Clone(s).(*registryv1.Server))
	}
	sort.Slice(resp.Servers, func(i, j int) bool { return resp.Servers[i].GetServerId() < resp.Servers[j].GetServerId() })
	return resp, nil
}

// UpdateServer implements the RPC: only setting an empty identity pin.
func (r *Registry) UpdateServer(_ context.Context, req *registryv1.UpdateServerRequest) (*registryv1.UpdateServerResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.servers[req.GetServer().GetServerId()]
	if !ok {
		return nil, apierror.NotFound("server", req.GetServer().GetServerId())
	}
	if s.GetVersion() != req.GetExpectedVersion() {
		return nil, apierror.Aborted("VERSION_MISMATCH", "the server changed")
	}
	want := proto.Clone(s).(*registryv1.Server)
	want.IdentityPin = req.GetServer().GetIdentityPin()
	if s.GetIdentityPin() != "" || !proto.Equal(stripMeta(want), stripMeta(req.GetServer())) {
		return nil, apierror.PermissionDenied("a service may only set an empty identity pin")
	}
	s.IdentityPin = want.GetIdentityPin()
	s.Version++
	r.appendLocked(&registryv1.Change{Kind: registryv1.ChangeKind_CHANGE_KIND_UPDATED, Object: &registryv1.Change_Server{Server: proto.Clone(s).(*registryv1.Server)}})
	return &registryv1.UpdateServerResponse{Server: proto.Clone(s).(*registryv1.Server)}, nil
}

// PinIdentities implements the RPC as the real registry does: each pin, in
// order, sets an empty pin at the version read, all under one lock.
func (r *Registry) PinIdentities(_ context.Context, req *registryv1.PinIdentitiesRequest) (*registryv1.PinIdentitiesResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	resp := &registryv1.PinIdentitiesResponse{}
	for _, p := range req.GetPins() {
		s, ok := r.servers[p.GetServerId()]
		res := &registryv1.PinResult{}
		switch {
		case !ok:
			res.Outcome = registryv1.PinOutcome_PIN_OUTCOME_NOT_FOUND
		case s.GetVersion() != p.GetExpectedVersion():
			res.Outcome = registryv1.PinOutcome_PIN_OUTCOME_VERSION_MISMATCH
		case s.GetIdentityPin() != "":
			res.Outcome = registryv1.PinOutcome_PIN_OUTCOME_ALREADY_PINNED
		default:
			s.IdentityPin = p.GetIdentityPin()
			s.Version++
			r.appendLocked(&registryv1.Change{Kind: registryv1.ChangeKind_CHANGE_KIND_UPDATED, Object: &registryv1.Change_Server{Server: proto.Clone(s).(*registryv1.Server)}})
			res.Outcome = registryv1.PinOutcome_PIN_OUTCOME_PINNED
		}
		if ok {
			res.Server = proto.Clone(s).(*registryv1.Server)
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

func stripMeta(s *registryv1.Server) *registryv1.Server {
	c := proto.Clone(s).(*registryv1.Server)
	c.Version, c.CreatedAt, c.UpdatedAt = 0, nil, nil
	return c
}

// GetAudienceClass implements the RPC.
func (r *Registry) GetAudienceClass(_ context.Context, req *registryv1.GetAudienceClassRequest) (*registryv1.GetAudienceClassResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.classes[req.GetName()]
	if !ok {
		return nil, apierror.NotFound("audience class", req.GetName())
	}
	return &registryv1.GetAudienceClassResponse{AudienceClass: proto.Clone(c).(*registryv1.AudienceClass)}, nil
}

// ListAudienceClasses implements the RPC (one page).
func (r *Registry) ListAudienceClasses(_ context.Context, req *registryv1.ListAudienceClassesRequest) (*registryv1.ListAudienceClassesResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	resp := &registryv1.ListAudienceClassesResponse{Revision: r.revisionLocked()}
	for _, c := range r.classes {
		if req.GetTenantId() != "" && c.GetTenantId() != req.GetTenantId() {
			continue
		}
		if req.GetServerId() != "" && !slices.ContainsFunc(c.GetServers(), func(s *registryv1.AudienceServer) bool { return s.GetServerId() == req.GetServerId() }) {
			continue
		}
		resp.AudienceClasses = append(resp.AudienceClasses, proto.Clone(c).(*registryv1.AudienceClass))
	}
	sort.Slice(resp.AudienceClasses, func(i, j int) bool { return resp.AudienceClasses[i].GetName() < resp.AudienceClasses[j].GetName() })
	return resp, nil
}

// GetPolicy implements the RPC (epoch and classes; no grants).
func (r *Registry) GetPolicy(_ context.Context, req *registryv1.GetPolicyRequest) (*registryv1.GetPolicyResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.epochs[req.GetTenantId()]
	if !ok {
		return nil, apierror.NotFound("tenant", req.GetTenantId())
	}
	return &registryv1.GetPolicyResponse{Policy: &registryv1.Policy{TenantId: req.GetTenantId(), PolicyEpoch: e}, Revision: r.revisionLocked()}, nil
}

// GetBinding implements the RPC: the server, the class's binding of it, the
// class's tenant and its epoch, read under one lock (one snapshot, as the
// real registry reads them).
func (r *Registry) GetBinding(_ context.Context, req *registryv1.GetBindingRequest) (*registryv1.GetBindingResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.servers[req.GetServerId()]
	if !ok {
		return nil, apierror.NotFound("server", req.GetServerId())
	}
	c, ok := r.classes[req.GetAudienceClass()]
	if !ok {
		return nil, apierror.NotFound("audience class", req.GetAudienceClass())
	}
	resp := &registryv1.GetBindingResponse{Server: proto.Clone(s).(*registryv1.Server), TenantId: c.GetTenantId(),
		PolicyEpoch: r.epochs[c.GetTenantId()], Revision: r.revisionLocked()}
	for _, b := range c.GetServers() {
		if b.GetServerId() == req.GetServerId() {
			resp.Binding = proto.Clone(b).(*registryv1.AudienceServer)
		}
	}
	return resp, nil
}

// GetBindings implements the RPC: each pair as GetBinding reads it.
func (r *Registry) GetBindings(ctx context.Context, req *registryv1.GetBindingsRequest) (*registryv1.GetBindingsResponse, error) {
	resp := &registryv1.GetBindingsResponse{}
	for _, q := range req.GetReads() {
		b, err := r.GetBinding(ctx, q)
		res := &registryv1.BindingResult{Binding: b}
		if err != nil {
			res.Binding = nil
			if _, known := r.GetServer(ctx, &registryv1.GetServerRequest{ServerId: q.GetServerId()}); known != nil {
				res.NotFound = "server"
			} else {
				res.NotFound = "audience class"
			}
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

// Watch implements the RPC with the shared Watch server.
func (r *Registry) Watch(req *registryv1.WatchRequest, stream registryv1.RegistryService_WatchServer) error {
	p, err := principal.Require(stream.Context())
	if err != nil {
		return err
	}
	viewer, err := changelog.ViewerOf(p)
	if err != nil {
		return err
	}
	srv := changelog.Server{Feed: r.log, Heartbeat: r.Heartbeat, Draining: r.drain, Relist: "ListServers, ListAudienceClasses, GetPolicy"}
	return srv.Serve(stream.Context(), viewer, req.GetFromRevision(), func(ev changelog.Event) error {
		if ev.Entry == nil {
			return stream.Send(&registryv1.WatchResponse{Event: &registryv1.WatchResponse_Heartbeat{
				Heartbeat: &catalogv1.Heartbeat{Revision: ev.Head, SentAt: timestamppb.New(ev.SentAt)}}})
		}
		c := &registryv1.Change{}
		if err := proto.Unmarshal(ev.Entry.Payload, c); err != nil {
			return err
		}
		c.Revision, c.CommittedAt = ev.Entry.Revision, timestamppb.New(ev.Entry.CommittedAt)
		return stream.Send(&registryv1.WatchResponse{Event: &registryv1.WatchResponse_Change{Change: c}})
	})
}

package registryclient

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/services/discovery/internal/coalesce"
)

// Errors a [Registry] returns; anything else wraps [ErrUnavailable].
var (
	// ErrNotFound: the named server, class or tenant does not exist.
	ErrNotFound = errors.New("registry: not found")
	// ErrConflict: the server changed since it was read (optimistic
	// concurrency lost).
	ErrConflict = errors.New("registry: the record changed")
	// ErrUnavailable: the registry could not be reached or failed.
	ErrUnavailable = errors.New("registry: unavailable")
)

// Registry is what discovery needs from the registry.
type Registry interface {
	// Server returns a server; ErrNotFound when unknown.
	Server(ctx context.Context, id string) (*registryv1.Server, error)
	// AudienceClass returns a class; ErrNotFound when unknown.
	AudienceClass(ctx context.Context, name string) (*registryv1.AudienceClass, error)
	// Servers returns every server and the registry revision the list was
	// read at.
	Servers(ctx context.Context) ([]*registryv1.Server, int64, error)
	// AudienceClasses returns every class covering serverID (every class
	// when serverID is empty).
	AudienceClasses(ctx context.Context, serverID string) ([]*registryv1.AudienceClass, error)
	// Binding returns a server as an audience class reads it, from one
	// snapshot: the server, the class's binding of it (nil when the class
	// does not cover it), the class's tenant and that tenant's current
	// policy epoch. One cheap call whatever the class's size: a scan's
	// start and its closing re-check read it. ErrNotFound when the server
	// or the class is unknown.
	Binding(ctx context.Context, serverID, audienceClass string) (Binding, error)
	// PinIdentity sets the identity pin of s (read with an empty pin) to
	// pin, by optimistic concurrency on s.Version, and returns the stored
	// server; ErrConflict when the server changed meanwhile.
	PinIdentity(ctx context.Context, s *registryv1.Server, pin string) (*registryv1.Server, error)
	// Watch opens RegistryService.Watch for the changes after `from`: a
	// [changelog.Source], followed by a [changelog.Follower] (which detects
	// a stalled stream and resumes or re-lists). The stream's errors wrap
	// changelog.ErrCompacted, ErrAhead or ErrDraining when the registry
	// says so. It ends when ctx ends.
	Watch(ctx context.Context, from int64) (changelog.Stream[*registryv1.Change], error)
}

// Binding is one server as one audience class reads it ([Registry.Binding]).
type Binding struct {
	Server *registryv1.Server
	// Binding is the class's binding of the server; nil when the class does
	// not cover it.
	Binding     *registryv1.AudienceServer
	TenantID    string
	PolicyEpoch int64
}

// Client is the gRPC implementation of [Registry].
type Client struct {
	conn     *grpc.ClientConn
	rpc      registryv1.RegistryServiceClient
	bindings *coalesce.Coalescer[*registryv1.GetBindingRequest, bindingAnswer]
	pins     *coalesce.Coalescer[pinRequest, pinAnswer]
}

// Dial returns a client of the registry at addr over transport (TLS, or
// plaintext: platform/tlsconfig) presenting creds (e.g.
// [principal.FileToken] with the service token) on every call. Connecting is
// lazy: an unreachable registry fails calls, not Dial.
func Dial(addr string, transport credentials.TransportCredentials, creds credentials.PerRPCCredentials) (*Client, error) {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(transport)}
	if creds != nil {
		opts = append(opts, grpc.WithPerRPCCredentials(creds))
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("registry: dial %s: %w", addr, err)
	}
	c := &Client{conn: conn, rpc: registryv1.NewRegistryServiceClient(conn)}
	c.bindings, c.pins = newCoalescer(c.sendBindings), newCoalescer(c.sendPins)
	return c, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// translate maps a gRPC error to the package's errors.
func translate(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	switch st.Code() {
	case codes.NotFound:
		return fmt.Errorf("%w: %s", ErrNotFound, st.Message())
	case codes.Aborted:
		return fmt.Errorf("%w: %s", ErrConflict, st.Message())
	case codes.Canceled:
		return err
	}
	return fmt.Errorf("%w: %s: %s", ErrUnavailable, st.Code(), st.Message())
}

// Server implements [Registry].
func (c *Client) Server(ctx context.Context, id string) (*registryv1.Server, error) {
	r, err := c.rpc.GetServer(ctx, &registryv1.GetServerRequest{ServerId: id})
	if err != nil {
		return nil, translate(err)
	}
	return r.GetServer(), nil
}

// AudienceClass implements [Registry].
func (c *Client) AudienceClass(ctx context.Context, name string) (*registryv1.AudienceClass, error) {
	r, err := c.rpc.GetAudienceClass(ctx, &registryv1.GetAudienceClassRequest{Name: name})
	if err != nil {
		return nil, translate(err)
	}
	return r.GetAudienceClass(), nil
}

// Servers implements [Registry].
func (c *Client) Servers(ctx context.Context) ([]*registryv1.Server, int64, error) {
	var out []*registryv1.Server
	var rev int64
	token := ""
	for first := true; first || token != ""; first = false {
		r, err := c.rpc.ListServers(ctx, &registryv1.ListServersRequest{PageSize: 1000, PageToken: token})
		if err != nil {
			return nil, 0, translate(err)
		}
		if first {
			rev = r.GetRevision()
		}
		out = append(out, r.GetServers()...)
		token = r.GetNextPageToken()
	}
	return out, rev, nil
}

// AudienceClasses implements [Registry].
func (c *Client) AudienceClasses(ctx context.Context, serverID string) ([]*registryv1.AudienceClass, error) {
	var out []*registryv1.AudienceClass
	token := ""
	for first := true; first || token != ""; first = false {
		r, err := c.rpc.ListAudienceClasses(ctx, &registryv1.ListAudienceClassesRequest{ServerId: serverID, PageSize: 1000, PageToken: token})
		if err != nil {
			return nil, translate(err)
		}
		out = append(out, r.GetAudienceClasses()...)
		token = r.GetNextPageToken()
	}
	return out, nil
}

// Binding implements [Registry]: calls made at the same time share one
// GetBindings call (see batch.go).
func (c *Client) Binding(ctx context.Context, serverID, audienceClass string) (Binding, error) {
	a, err := c.bindings.Do(ctx, &registryv1.GetBindingRequest{ServerId: serverID, AudienceClass: audienceClass})
	if err != nil {
		return Binding{}, err
	}
	return a.b, a.err
}

// binding is one GetBinding call.
func (c *Client) binding(ctx context.Context, q *registryv1.GetBindingRequest) (Binding, error) {
	r, err := c.rpc.GetBinding(ctx, q)
	if err != nil {
		return Binding{}, translate(err)
	}
	return bindingOf(r), nil
}

func bindingOf(r *registryv1.GetBindingResponse) Binding {
	return Binding{Server: r.GetServer(), Binding: r.GetBinding(), TenantID: r.GetTenantId(), PolicyEpoch: r.GetPolicyEpoch()}
}

// PinIdentity implements [Registry]: pins asked for at the same time share
// one PinIdentities call (see batch.go).
func (c *Client) PinIdentity(ctx context.Context, s *registryv1.Server, pin string) (*registryv1.Server, error) {
	a, err := c.pins.Do(ctx, pinRequest{server: s, pin: pin})
	if err != nil {
		return nil, err
	}
	return a.s, a.err
}

// updatePin is one UpdateServer call that sets s's empty pin.
func (c *Client) updatePin(ctx context.Context, s *registryv1.Server, pin string) (*registryv1.Server, error) {
	upd := cloneServer(s)
	upd.IdentityPin = pin
	r, err := c.rpc.UpdateServer(ctx, &registryv1.UpdateServerRequest{Server: upd, ExpectedVersion: s.GetVersion()})
	if err != nil {
		return nil, translate(err)
	}
	return r.GetServer(), nil
}

// Watch implements [Registry].
func (c *Client) Watch(ctx context.Context, from int64) (changelog.Stream[*registryv1.Change], error) {
	return changelog.RegistrySource(c.rpc).Watch(ctx, from)
}

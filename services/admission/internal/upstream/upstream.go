package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/services/admission/internal/decision"
	"github.com/toolcrib/toolcrib/services/admission/internal/replica"
)

// mapErr maps a gRPC error at this edge.
func mapErr(err error) error {
	switch status.Code(err) {
	case codes.OK:
		return nil
	case codes.NotFound:
		return fmt.Errorf("%w: %v", replica.ErrNotFound, err)
	}
	return err
}

// Registry adapts RegistryService.
type Registry struct {
	C       registryv1.RegistryServiceClient
	Timeout time.Duration
}

func (r *Registry) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, max(r.Timeout, time.Second))
}

// PolicyFromProto converts a registry policy.
func PolicyFromProto(p *registryv1.Policy) replica.Policy {
	out := replica.Policy{Tenant: p.GetTenantId(), Epoch: p.GetPolicyEpoch(), Classes: map[string][]string{}}
	for _, g := range p.GetGrants() {
		out.Grants = append(out.Grants, decision.Grant{Subject: g.GetSubject(), Group: g.GetGroup(),
			Scopes: g.GetScopes(), Classes: g.GetAudienceClasses()})
	}
	for _, c := range p.GetAudienceClasses() {
		for _, s := range c.GetServers() {
			out.Classes[c.GetName()] = append(out.Classes[c.GetName()], s.GetServerId())
		}
	}
	return out
}

// Current implements replica.Policies.
func (r *Registry) Current(ctx context.Context, tenant string) (replica.Policy, error) {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	resp, err := r.C.GetPolicy(ctx, &registryv1.GetPolicyRequest{TenantId: tenant})
	if err != nil {
		return replica.Policy{}, mapErr(err)
	}
	return PolicyFromProto(resp.GetPolicy()), nil
}

// PolicyAt implements replica.Policies (current epoch only; see the
// package doc).
func (r *Registry) PolicyAt(ctx context.Context, tenant string, epoch int64) (replica.Policy, error) {
	p, err := r.Current(ctx, tenant)
	if err != nil {
		return replica.Policy{}, err
	}
	if p.Epoch != epoch {
		return replica.Policy{}, replica.ErrNotKept
	}
	return p, nil
}

// Review implements replica.Reviews from GetTool (interim; see the package
// doc). The approved contract is the current one when the current approval
// is approved and binds digest; else the newest approval in force whose
// descriptor digest is digest.
func (r *Registry) Review(ctx context.Context, _ string, _ int64, toolID, digest string) (decision.Review, error) {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	resp, err := r.C.GetTool(ctx, &registryv1.GetToolRequest{ToolId: toolID})
	if status.Code(err) == codes.NotFound {
		return decision.Review{}, nil
	}
	if err != nil {
		return decision.Review{}, err
	}
	t := resp.GetTool()
	rv := decision.Review{Known: true, Enabled: t.GetEnabled()}
	contract := func(c *registryv1.ToolContract) *decision.Contract {
		return &decision.Contract{Effect: c.GetEffect(), Scope: c.GetScope(), Confirmation: c.GetConfirmation()}
	}
	if t.GetReviewState() == registryv1.ReviewState_REVIEW_STATE_APPROVED && t.GetDescriptorDigest() == digest && t.GetContract() != nil {
		rv.Approved = contract(t.GetContract())
		return rv, nil
	}
	for _, a := range t.GetApprovals() { // newest first
		if a.GetDescriptorDigest() == digest && a.GetContract() != nil {
			rv.Approved = contract(a.GetContract())
			break
		}
	}
	return rv, nil
}

// Discovery adapts DiscoveryService.
type Discovery struct {
	C       discoveryv1.DiscoveryServiceClient
	Timeout time.Duration
	Logger  *slog.Logger

	binds chan bind
	seen  *lru.Cache[bind, struct{}]
	// RunTTL is how long a run binds its generation.
	RunTTL time.Duration
}

type bind struct {
	run, server, class string
	gen                int64
}

func (d *Discovery) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, max(d.Timeout, 5*time.Second))
}

// PointerFromProto converts a discovery pointer.
func PointerFromProto(p *discoveryv1.ActivePointer) replica.Pointer {
	return replica.Pointer{
		ServerID: p.GetServerId(), Class: p.GetAudienceClass(), Tenant: p.GetTenantId(), Generation: p.GetGeneration(),
		Closed:      p.GetState() == discoveryv1.PointerState_POINTER_STATE_CLOSED,
		Unversioned: p.GetSnapshotState() == catalogv1.DiscoveryState_DISCOVERY_STATE_UNVERSIONED_OBSERVATION,
		FreshUntil:  p.GetFreshUntil().AsTime(), Revision: p.GetRevision(),
	}
}

// Pointer implements grpcapi.PointerSource.
func (d *Discovery) Pointer(ctx context.Context, server, class string) (replica.Pointer, error) {
	ctx, cancel := d.ctx(ctx)
	defer cancel()
	resp, err := d.C.GetActiveSnapshot(ctx, &discoveryv1.GetActiveSnapshotRequest{ServerId: server, AudienceClass: class, ToolsPageSize: 1})
	if err != nil {
		return replica.Pointer{}, mapErr(err)
	}
	return PointerFromProto(resp.GetPointer()), nil
}

// Generation implements replica.Catalog: every tool page of the snapshot.
func (d *Discovery) Generation(ctx context.Context, server, class string, gen int64) (*replica.Generation, error) {
	ctx, cancel := d.ctx(ctx)
	defer cancel()
	out := &replica.Generation{ServerID: server, Class: class, Generation: gen, Tools: map[string]*replica.ToolEntry{}}
	token := ""
	for page := 0; ; page++ {
		if page > 10_000 {
			return nil, errors.New("upstream: snapshot pages do not end")
		}
		resp, err := d.C.GetSnapshot(ctx, &discoveryv1.GetSnapshotRequest{ServerId: server, AudienceClass: class,
			Generation: gen, ToolsPageSize: 500, ToolsPageToken: token})
		if err != nil {
			return nil, mapErr(err)
		}
		out.State = resp.GetSnapshot().GetState()
		for _, t := range resp.GetSnapshot().GetTools() {
			out.Tools[t.GetToolId()] = entry(t)
		}
		if token = resp.GetNextToolsPageToken(); token == "" {
			return out, nil
		}
	}
}

func entry(t *catalogv1.ToolDescriptor) *replica.ToolEntry {
	var raw struct {
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	_ = json.Unmarshal(t.GetRaw(), &raw) // discovery validated it; a bad one fails the argument check
	return &replica.ToolEntry{ToolID: t.GetToolId(), Name: t.GetName(), Title: t.GetTitle(), Description: t.GetDescription(),
		DescriptorDigest: t.GetDescriptorDigest(), InputSchemaDigest: t.GetInputSchemaDigest(), InputSchema: raw.InputSchema}
}

// StartBinder starts the queue behind [Discovery.Bind]; it runs until ctx
// ends.
func (d *Discovery) StartBinder(ctx context.Context) error {
	d.binds = make(chan bind, 1024)
	d.seen, _ = lru.New[bind, struct{}](100_000)
	if d.RunTTL <= 0 {
		d.RunTTL = time.Hour
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case b := <-d.binds:
			cctx, cancel := d.ctx(ctx)
			_, err := d.C.BindGeneration(cctx, &discoveryv1.BindGenerationRequest{ServerId: b.server, AudienceClass: b.class,
				Generation: b.gen, RunId: b.run, BoundUntil: timestamppb.New(time.Now().Add(d.RunTTL))})
			cancel()
			if err != nil {
				d.seen.Remove(b) // retried by the run's next Check
				if d.Logger != nil {
					d.Logger.Debug("bind generation failed", "server", b.server, "generation", b.gen, "err", err)
				}
			}
		}
	}
}

// Bind implements grpcapi.Binder: queued, one call per (run, pointer,
// generation), dropped when the queue is full.
func (d *Discovery) Bind(run, server, class string, gen int64) {
	if d.binds == nil {
		return
	}
	b := bind{run, server, class, gen}
	if ok, _ := d.seen.ContainsOrAdd(b, struct{}{}); ok {
		return
	}
	select {
	case d.binds <- b:
	default:
		d.seen.Remove(b)
	}
}

// follow runs one Watch loop: connect from the last revision, hand every
// message to handle, reconnect with back-off; a compacted revision restarts
// from 0 (heads only move forward, so a replay is harmless).
func follow(ctx context.Context, name string, logger *slog.Logger, open func(ctx context.Context, from int64) (func() (int64, error), error)) error {
	var from int64
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		recv, err := open(ctx, from)
		if err == nil {
			for {
				var rev int64
				rev, err = recv()
				if err != nil {
					break
				}
				if rev > from {
					from = rev
				}
				backoff = 100 * time.Millisecond
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		if status.Code(err) == codes.FailedPrecondition {
			logger.Warn("watch revision compacted; resyncing from the oldest kept", "stream", name, "from", from)
			from = 0
		} else {
			logger.Warn("watch stream ended; reconnecting", "stream", name, "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
	return nil
}

// FollowRegistry keeps the tenants' epochs and the registry stream's
// heartbeats in heads until ctx ends.
func FollowRegistry(ctx context.Context, c registryv1.RegistryServiceClient, heads *replica.Heads, logger *slog.Logger) error {
	return follow(ctx, "registry", logger, func(ctx context.Context, from int64) (func() (int64, error), error) {
		st, err := c.Watch(ctx, &registryv1.WatchRequest{FromRevision: from})
		if err != nil {
			return nil, err
		}
		return func() (int64, error) {
			msg, err := st.Recv()
			if err != nil {
				return 0, err
			}
			if hb := msg.GetHeartbeat(); hb != nil {
				heads.Heartbeat(replica.RegistryStream)
				return hb.GetRevision(), nil
			}
			ch := msg.GetChange()
			switch {
			case ch.GetPolicy() != nil:
				heads.SetEpoch(ch.GetPolicy().GetTenantId(), ch.GetPolicy().GetPolicyEpoch())
			case ch.GetTenant() != nil:
				heads.SetEpoch(ch.GetTenant().GetTenantId(), ch.GetTenant().GetPolicyEpoch())
			}
			return ch.GetRevision(), nil
		}, nil
	})
}

// FollowDiscovery keeps the pointer heads and the discovery stream's
// heartbeats in heads until ctx ends.
func FollowDiscovery(ctx context.Context, c discoveryv1.DiscoveryServiceClient, heads *replica.Heads, logger *slog.Logger) error {
	return follow(ctx, "discovery", logger, func(ctx context.Context, from int64) (func() (int64, error), error) {
		st, err := c.Watch(ctx, &discoveryv1.WatchRequest{FromRevision: from})
		if err != nil {
			return nil, err
		}
		return func() (int64, error) {
			msg, err := st.Recv()
			if err != nil {
				return 0, err
			}
			if hb := msg.GetHeartbeat(); hb != nil {
				heads.Heartbeat(replica.DiscoveryStream)
				return hb.GetRevision(), nil
			}
			ch := msg.GetChange()
			if p := ch.GetPointer(); p != nil {
				heads.SetPointer(PointerFromProto(p))
			}
			return ch.GetRevision(), nil
		}, nil
	})
}

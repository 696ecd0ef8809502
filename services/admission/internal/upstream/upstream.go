package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/changelog"
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

// PolicyFromProto converts a registry policy, its rollout stages
// included.
func PolicyFromProto(p *registryv1.Policy) replica.Policy {
	out := replica.Policy{Tenant: p.GetTenantId(), Epoch: p.GetPolicyEpoch(), Classes: map[string][]string{}}
	for _, g := range p.GetGrants() {
		out.Grants = append(out.Grants, decision.GrantOf(g.GetSubject(), g.GetGroup(), g.GetScopes(), g.GetAudienceClasses(), g.GetCondition()))
	}
	for _, c := range p.GetAudienceClasses() {
		for _, s := range c.GetServers() {
			out.Classes[c.GetName()] = append(out.Classes[c.GetName()], s.GetServerId())
		}
	}
	for _, st := range p.GetRolloutStages() {
		if st.GetStage() == registryv1.Stage_STAGE_FULL {
			continue // the stage of a pair not listed
		}
		if out.Stages == nil {
			out.Stages = map[replica.StageKey]*decision.Rollout{}
		}
		// Any other value, UNSPECIFIED or one newer than this replica,
		// is kept as it is: the decision treats it as SHADOW.
		out.Stages[replica.StageKey{Server: st.GetServerId(), Class: st.GetAudienceClass()}] = &decision.Rollout{
			Stage: st.GetStage(), Percent: st.GetCanaryPercent(), Effects: slices.Clone(st.GetCanaryEffects())}
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

// Reasons of GetPolicy's OUT_OF_RANGE (registry.proto).
const (
	reasonEpochNotReached    = "EPOCH_NOT_REACHED"
	reasonEpochBeforeHistory = "EPOCH_BEFORE_HISTORY"
)

// errorReason returns the ErrorInfo reason of a gRPC error; empty if none.
func errorReason(err error) string {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}

// PolicyAt implements replica.Policies through GetPolicy(at_epoch): the
// grants and classes in force at exactly epoch, from the registry's policy
// history. An epoch from before that history is replica.ErrNotKept; one
// the registry has not reached (this replica is ahead of the registry
// replica it asked, which cannot happen with one registry) is an error.
func (r *Registry) PolicyAt(ctx context.Context, tenant string, epoch int64) (replica.Policy, error) {
	if epoch <= 0 {
		return replica.Policy{}, fmt.Errorf("%w: epoch %d", replica.ErrNotKept, epoch)
	}
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	resp, err := r.C.GetPolicy(ctx, &registryv1.GetPolicyRequest{TenantId: tenant, AtEpoch: epoch})
	if status.Code(err) == codes.OutOfRange {
		switch errorReason(err) {
		case reasonEpochBeforeHistory:
			return replica.Policy{}, fmt.Errorf("%w: %v", replica.ErrNotKept, err)
		case reasonEpochNotReached:
			return replica.Policy{}, fmt.Errorf("upstream: the registry has not reached epoch %d: %w", epoch, err)
		}
	}
	if err != nil {
		return replica.Policy{}, mapErr(err)
	}
	p := PolicyFromProto(resp.GetPolicy())
	if p.Epoch != epoch {
		return replica.Policy{}, fmt.Errorf("upstream: asked for epoch %d, the registry answered %d", epoch, p.Epoch)
	}
	return p, nil
}

// Review implements replica.Reviews through GetToolReview: the review of
// exactly digest for the audience class, read with the class's tenant's
// epoch in one transaction. NOT_FOUND (unknown tool, or a class that does
// not cover or never saw it) is an unknown tool, which denies.
func (r *Registry) Review(ctx context.Context, tenant string, _ int64, class, toolID, digest string) (decision.Review, error) {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	resp, err := r.C.GetToolReview(ctx, &registryv1.GetToolReviewRequest{ToolId: toolID, DescriptorDigest: digest, AudienceClass: class})
	if status.Code(err) == codes.NotFound {
		return decision.Review{}, nil
	}
	if err != nil {
		return decision.Review{}, err
	}
	if resp.GetTenantId() != tenant {
		// The class is another tenant's: never decide from it.
		return decision.Review{}, fmt.Errorf("upstream: class %q belongs to tenant %q, not %q", class, resp.GetTenantId(), tenant)
	}
	rv := decision.Review{Known: true, Enabled: resp.GetEnabled(), Trust: resp.GetTrustLevel()}
	if c := resp.GetContract(); resp.GetApproved() && c != nil {
		rv.Approved = &decision.Contract{Effect: c.GetEffect(), Scope: c.GetScope(), Confirmation: c.GetConfirmation(),
			ApprovalDigest: resp.GetApprovalDigest()}
	}
	return rv, nil
}

// Discovery adapts DiscoveryService.
type Discovery struct {
	C       discoveryv1.DiscoveryServiceClient
	Timeout time.Duration
	Logger  *slog.Logger

	// once makes binds and seen, on the first of StartBinder or Bind (the
	// binder starts in its own goroutine while Checks already call Bind).
	once  sync.Once
	binds chan bind
	seen  *lru.Cache[bind, struct{}]
	// RunTTL is how long a run binds its generation.
	RunTTL time.Duration
}

func (d *Discovery) initBinder() {
	d.once.Do(func() {
		d.binds = make(chan bind, 1024)
		d.seen, _ = lru.New[bind, struct{}](100_000)
	})
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
	d.initBinder()
	ttl := d.RunTTL
	if ttl <= 0 {
		ttl = time.Hour
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case b := <-d.binds:
			cctx, cancel := d.ctx(ctx)
			_, err := d.C.BindGeneration(cctx, &discoveryv1.BindGenerationRequest{ServerId: b.server, AudienceClass: b.class,
				Generation: b.gen, RunId: b.run, BoundUntil: timestamppb.New(time.Now().Add(ttl))})
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
	d.initBinder()
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

// FollowOptions tune the two followers.
type FollowOptions struct {
	// Window is the validity window (I8). A stream silent that long is
	// dropped and reopened (the replica is stale by then anyway), and the
	// reconnect backoff never exceeds it, so a healed link is used within
	// about one window.
	Window time.Duration
	Logger *slog.Logger
}

func (o FollowOptions) backoff() (minB, maxB, stall time.Duration) {
	w := max(o.Window, time.Second)
	return 100 * time.Millisecond, w, w
}

// RegistryFollower returns the shared follower ([changelog.Follower]) of
// RegistryService.Watch into heads: every tenant and policy change raises
// the tenant's epoch, and heads read the stream's newest heartbeat from
// it. Its list step re-reads the current epoch of every tenant the heads
// know (tenants are learned on their first Check) and watches from the
// oldest revision those reads reflect; heads only move forward, so the
// replay after it is harmless.
func RegistryFollower(c registryv1.RegistryServiceClient, heads *replica.Heads, o FollowOptions) *changelog.Follower[*registryv1.Change] {
	minB, maxB, stall := o.backoff()
	reg := &Registry{C: c}
	f := changelog.NewFollower(changelog.FollowerConfig[*registryv1.Change]{
		Name:   changelog.RegistryHead.String(),
		Source: changelog.RegistrySource(c),
		List: func(ctx context.Context) (int64, error) {
			var from int64 = -1
			for _, tenant := range heads.Tenants() {
				cctx, cancel := reg.ctx(ctx)
				resp, err := c.GetPolicy(cctx, &registryv1.GetPolicyRequest{TenantId: tenant})
				cancel()
				if status.Code(err) == codes.NotFound {
					continue // deleted: its Checks find no tenant
				}
				if err != nil {
					return 0, fmt.Errorf("current policy of a known tenant: %w", err)
				}
				heads.SetEpoch(tenant, resp.GetPolicy().GetPolicyEpoch())
				if from < 0 || resp.GetRevision() < from {
					from = resp.GetRevision()
				}
			}
			return max(from, 0), nil
		},
		Apply: func(_ context.Context, _ int64, ch *registryv1.Change) error {
			switch {
			case ch.GetPolicy() != nil:
				heads.SetEpoch(ch.GetPolicy().GetTenantId(), ch.GetPolicy().GetPolicyEpoch())
			case ch.GetTenant() != nil:
				heads.SetEpoch(ch.GetTenant().GetTenantId(), ch.GetTenant().GetPolicyEpoch())
			}
			return nil
		},
		MinBackoff: minB, MaxBackoff: maxB, StallTimeout: stall, Logger: o.Logger,
	})
	heads.Follow(changelog.RegistryHead, f.Freshness)
	return f
}

// DiscoveryFollower returns the shared follower of DiscoveryService.Watch
// into heads: every pointer move replaces the pointer's head (a head is
// only replaced by a newer revision). Its list step re-reads every pointer
// the heads hold and watches from the oldest change discovery keeps.
func DiscoveryFollower(c discoveryv1.DiscoveryServiceClient, heads *replica.Heads, o FollowOptions) *changelog.Follower[*discoveryv1.PointerChange] {
	minB, maxB, stall := o.backoff()
	disc := &Discovery{C: c}
	f := changelog.NewFollower(changelog.FollowerConfig[*discoveryv1.PointerChange]{
		Name:   changelog.DiscoveryHead.String(),
		Source: changelog.DiscoverySource(c),
		List: func(ctx context.Context) (int64, error) {
			for _, k := range heads.PointerKeys() {
				p, err := disc.Pointer(ctx, k[0], k[1])
				if errors.Is(err, replica.ErrNotFound) {
					continue
				}
				if err != nil {
					return 0, fmt.Errorf("pointer of a known pair: %w", err)
				}
				heads.SetPointer(p)
			}
			return 0, nil
		},
		Apply: func(_ context.Context, _ int64, ch *discoveryv1.PointerChange) error {
			if p := ch.GetPointer(); p != nil {
				heads.SetPointer(PointerFromProto(p))
			}
			return nil
		},
		MinBackoff: minB, MaxBackoff: maxB, StallTimeout: stall, Logger: o.Logger,
	})
	heads.Follow(changelog.DiscoveryHead, f.Freshness)
	return f
}

package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/canonical"
	"github.com/toolcrib/toolcrib/platform/egress"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/secretref"
	"github.com/toolcrib/toolcrib/services/registry/internal/contract"
	"github.com/toolcrib/toolcrib/services/registry/internal/store"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// noTenant is a tenant filter no class matches (tenant ids never contain
// `/`): what a principal that may see no tenant lists.
const noTenant = "/"

// Options configure a [Server].
type Options struct {
	// Heartbeat is the Watch heartbeat interval.
	Heartbeat time.Duration
	// Draining is closed when the server shuts down; Watch streams end.
	Draining <-chan struct{}
	// Logger logs stream failures.
	Logger *slog.Logger
	// Egress is the policy a server's URL must pass.
	Egress egress.Policy
	// Secrets is the policy an audience class's secret references must
	// pass.
	Secrets secretref.Policy
}

// Server implements [registryv1.RegistryServiceServer].
type Server struct {
	registryv1.UnimplementedRegistryServiceServer
	store *store.Store
	opts  Options
}

// New returns the service on st.
func New(st *store.Store, opts Options) *Server {
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Server{store: st, opts: opts}
}

// translate turns the store's typed errors into API errors; it is the one
// place that does. Anything else passes through (an [apierror.Error] keeps
// its meaning, the rest becomes INTERNAL at the interceptor, logged).
func translate(err error) error {
	var (
		nf    *store.NotFoundError
		ex    *store.ExistsError
		stale *store.StaleVersionError
		inv   *store.InvalidError
		pre   *store.PreconditionError
		perm  *store.PermissionError
		epoch *store.EpochError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &nf):
		return apierror.NotFound(nf.Kind, nf.ID)
	case errors.As(err, &ex):
		return apierror.AlreadyExists(ex.Kind, ex.ID)
	case errors.As(err, &stale):
		e := apierror.Aborted("VERSION_MISMATCH", stale.Error())
		e.Metadata = map[string]string{"kind": stale.Kind, "id": stale.ID, "stored_version": fmt.Sprint(stale.Stored)}
		return e
	case errors.As(err, &inv):
		return inv.Violations.Err()
	case errors.As(err, &pre):
		return &apierror.Error{Code: codes.FailedPrecondition, Reason: pre.Reason, Message: pre.Message, Violations: pre.Violations}
	case errors.As(err, &perm):
		return apierror.PermissionDenied(perm.Message)
	case errors.As(err, &epoch):
		e := &apierror.Error{Code: codes.OutOfRange, Reason: epoch.Reason, Message: epoch.Error()}
		e.Metadata = map[string]string{"tenant_id": epoch.Tenant, "policy_epoch": fmt.Sprint(epoch.Current), "history_since": fmt.Sprint(epoch.Since)}
		return e
	}
	return err
}

// seesSecretRefs reports whether p may read audience classes' secret
// references: platform admins and services (discovery resolves them) only.
func seesSecretRefs(p principal.Principal) bool { return p.Admin || p.Service }

// redact returns the classes as p may see them: without secret references
// unless p is an admin or a service. The stored messages are not changed.
func redact(p principal.Principal, classes []*registryv1.AudienceClass) []*registryv1.AudienceClass {
	if seesSecretRefs(p) {
		return classes
	}
	out := make([]*registryv1.AudienceClass, len(classes))
	for i, a := range classes {
		c := proto.Clone(a).(*registryv1.AudienceClass)
		for _, s := range c.GetServers() {
			s.SecretRef = ""
		}
		out[i] = c
	}
	return out
}

// RegisterServer implements RegistryService.RegisterServer.
func (s *Server) RegisterServer(ctx context.Context, req *registryv1.RegisterServerRequest) (*registryv1.RegisterServerResponse, error) {
	if _, err := principal.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	var v apierror.Violations
	validateServer(&v, "server", req.GetServer(), s.opts.Egress)
	if err := v.Err(); err != nil {
		return nil, err
	}
	srv, err := s.store.RegisterServer(ctx, normalizeServer(req.GetServer()))
	if err != nil {
		return nil, translate(err)
	}
	return &registryv1.RegisterServerResponse{Server: srv}, nil
}

// normalizeServer drops output-only fields and a zero scan interval.
func normalizeServer(in *registryv1.Server) *registryv1.Server {
	s := proto.Clone(in).(*registryv1.Server)
	s.Version, s.CreatedAt, s.UpdatedAt = 0, nil, nil
	if s.GetScanInterval().AsDuration() == 0 {
		s.ScanInterval = nil
	}
	return s
}

// GetServer implements RegistryService.GetServer.
func (s *Server) GetServer(ctx context.Context, req *registryv1.GetServerRequest) (*registryv1.GetServerResponse, error) {
	caller, err := principal.Require(ctx)
	if err != nil {
		return nil, err
	}
	var v apierror.Violations
	checkServerID(&v, "server_id", req.GetServerId())
	if err := v.Err(); err != nil {
		return nil, err
	}
	srv, err := s.store.GetServer(ctx, viewOf(caller), req.GetServerId())
	if err != nil {
		return nil, translate(err)
	}
	return &registryv1.GetServerResponse{Server: srv}, nil
}

// ListServers implements RegistryService.ListServers.
func (s *Server) ListServers(ctx context.Context, req *registryv1.ListServersRequest) (*registryv1.ListServersResponse, error) {
	caller, err := principal.Require(ctx)
	if err != nil {
		return nil, err
	}
	var v apierror.Violations
	p := page(&v, req.GetPageSize(), req.GetPageToken())
	if err := v.Err(); err != nil {
		return nil, err
	}
	servers, hasMore, rev, err := s.store.ListServers(ctx, viewOf(caller), p)
	if err != nil {
		return nil, translate(err)
	}
	resp := &registryv1.ListServersResponse{Servers: servers, Revision: rev}
	if len(servers) > 0 {
		resp.NextPageToken = nextToken(hasMore, servers[len(servers)-1].GetServerId())
	}
	return resp, nil
}

// UpdateServer implements RegistryService.UpdateServer.
func (s *Server) UpdateServer(ctx context.Context, req *registryv1.UpdateServerRequest) (*registryv1.UpdateServerResponse, error) {
	p, err := principal.Require(ctx)
	if err != nil {
		return nil, err
	}
	if !p.Admin && !p.Service {
		return nil, apierror.PermissionDenied("this operation needs a platform admin")
	}
	var v apierror.Violations
	validateServer(&v, "server", req.GetServer(), s.opts.Egress)
	if req.GetExpectedVersion() <= 0 {
		v.Add("expected_version", "required: the version you read")
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	srv, err := s.store.UpdateServer(ctx, p, normalizeServer(req.GetServer()), req.GetExpectedVersion())
	if err != nil {
		return nil, translate(err)
	}
	return &registryv1.UpdateServerResponse{Server: srv}, nil
}

// DeleteServer implements RegistryService.DeleteServer.
func (s *Server) DeleteServer(ctx context.Context, req *registryv1.DeleteServerRequest) (*registryv1.DeleteServerResponse, error) {
	if _, err := principal.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	var v apierror.Violations
	checkServerID(&v, "server_id", req.GetServerId())
	if req.GetExpectedVersion() <= 0 {
		v.Add("expected_version", "required: the version you read")
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	srv, tools, err := s.store.DeleteServer(ctx, req.GetServerId(), req.GetExpectedVersion())
	if err != nil {
		return nil, translate(err)
	}
	return &registryv1.DeleteServerResponse{Server: srv, DeletedToolIds: tools}, nil
}

// PutTenant implements RegistryService.PutTenant.
func (s *Server) PutTenant(ctx context.Context, req *registryv1.PutTenantRequest) (*registryv1.PutTenantResponse, error) {
	if _, err := principal.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	var v apierror.Violations
	if req.GetTenant() == nil {
		v.Add("tenant", "required")
	}
	checkTenantID(&v, "tenant.tenant_id", req.GetTenant().GetTenantId())
	checkLine(&v, "tenant.display_name", req.GetTenant().GetDisplayName(), maxName)
	if err := v.Err(); err != nil {
		return nil, err
	}
	t, err := s.store.PutTenant(ctx, req.GetTenant())
	if err != nil {
		return nil, translate(err)
	}
	return &registryv1.PutTenantResponse{Tenant: t}, nil
}

// PutAudienceClass implements RegistryService.PutAudienceClass.
func (s *Server) PutAudienceClass(ctx context.Context, req *registryv1.PutAudienceClassRequest) (*registryv1.PutAudienceClassResponse, error) {
	if _, err := principal.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	var v apierror.Violations
	validateAudienceClass(&v, req.GetAudienceClass(), s.opts.Secrets)
	if req.GetExpectedVersion() < 0 {
		v.Add("expected_version", "must be 0 (create) or the version you read")
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	a, epoch, err := s.store.PutAudienceClass(ctx, req.GetAudienceClass(), req.GetExpectedVersion())
	if err != nil {
		return nil, translate(err)
	}
	return &registryv1.PutAudienceClassResponse{AudienceClass: a, PolicyEpoch: epoch}, nil
}

// GetAudienceClass implements RegistryService.GetAudienceClass.
func (s *Server) GetAudienceClass(ctx context.Context, req *registryv1.GetAudienceClassRequest) (*registryv1.GetAudienceClassResponse, error) {
	p, err := principal.Require(ctx)
	if err != nil {
		return nil, err
	}
	var v apierror.Violations
	checkClassName(&v, "name", req.GetName())
	if err := v.Err(); err != nil {
		return nil, err
	}
	a, err := s.store.GetAudienceClass(ctx, req.GetName())
	if err == nil && !p.SeesTenant(a.GetTenantId()) {
		// Another tenant's class is answered exactly as a missing one.
		err = &store.NotFoundError{Kind: "audience class", ID: req.GetName()}
	}
	if err != nil {
		return nil, translate(err)
	}
	return &registryv1.GetAudienceClassResponse{AudienceClass: redact(p, []*registryv1.AudienceClass{a})[0]}, nil
}

// GetBinding implements RegistryService.GetBinding.
func (s *Server) GetBinding(ctx context.Context, req *registryv1.GetBindingRequest) (*registryv1.GetBindingResponse, error) {
	p, err := principal.Require(ctx)
	if err != nil {
		return nil, err
	}
	var v apierror.Violations
	checkServerID(&v, "server_id", req.GetServerId())
	checkClassName(&v, "audience_class", req.GetAudienceClass())
	if err := v.Err(); err != nil {
		return nil, err
	}
	b, err := s.store.GetBinding(ctx, req.GetServerId(), req.GetAudienceClass())
	if err == nil && !p.SeesTenant(b.TenantID) {
		// Another tenant's class is answered exactly as a missing one.
		err = &store.NotFoundError{Kind: "audience class", ID: req.GetAudienceClass()}
	}
	if err != nil {
		return nil, translate(err)
	}
	if b.Binding != nil && !seesSecretRefs(p) {
		b.Binding.SecretRef = ""
	}
	return &registryv1.GetBindingResponse{Server: b.Server, Binding: b.Binding, TenantId: b.TenantID,
		PolicyEpoch: b.PolicyEpoch, Revision: b.Revision}, nil
}

// ListAudienceClasses implements RegistryService.ListAudienceClasses.
func (s *Server) ListAudienceClasses(ctx context.Context, req *registryv1.ListAudienceClassesRequest) (*registryv1.ListAudienceClassesResponse, error) {
	caller, err := principal.Require(ctx)
	if err != nil {
		return nil, err
	}
	var v apierror.Violations
	if req.GetTenantId() != "" {
		checkTenantID(&v, "tenant_id", req.GetTenantId())
	}
	if req.GetServerId() != "" {
		checkServerID(&v, "server_id", req.GetServerId())
	}
	p := page(&v, req.GetPageSize(), req.GetPageToken())
	if err := v.Err(); err != nil {
		return nil, err
	}
	f := store.ClassFilter{TenantID: req.GetTenantId(), ServerID: req.GetServerId()}
	if !caller.Admin && !caller.Service {
		// A tenant principal lists only its own tenant; filtering by another
		// tenant matches nothing, as filtering by an unknown one does.
		if f.TenantID == "" {
			f.TenantID = caller.Tenant
		}
		if !caller.SeesTenant(f.TenantID) {
			f.TenantID = noTenant
		}
	}
	classes, hasMore, rev, err := s.store.ListAudienceClasses(ctx, f, p)
	if err != nil {
		return nil, translate(err)
	}
	resp := &registryv1.ListAudienceClassesResponse{AudienceClasses: redact(caller, classes), Revision: rev}
	if len(classes) > 0 {
		resp.NextPageToken = nextToken(hasMore, classes[len(classes)-1].GetName())
	}
	return resp, nil
}

// PublishContract implements RegistryService.PublishContract.
func (s *Server) PublishContract(ctx context.Context, req *registryv1.PublishContractRequest) (*registryv1.PublishContractResponse, error) {
	p, err := principal.Require(ctx)
	if err != nil {
		return nil, err
	}
	var v apierror.Violations
	if req.GetContract() == nil {
		v.Add("contract", "required")
	}
	contract.CheckToolID(&v, "contract.tool_id", req.GetContract().GetToolId())
	if err := v.Err(); err != nil {
		return nil, err
	}
	// The rest of the contract is validated against the tool's descriptor,
	// inside the transaction that publishes it.
	t, err := s.store.PublishContract(ctx, p, viewOf(p), req.GetContract())
	if err != nil {
		return nil, translate(err)
	}
	return &registryv1.PublishContractResponse{Tool: t}, nil
}

// toolAction validates a tool id and the optional free text of a review
// action, and returns the caller.
func toolAction(ctx context.Context, toolID, textField, text string) (principal.Principal, error) {
	p, err := principal.Require(ctx)
	if err != nil {
		return p, err
	}
	var v apierror.Violations
	contract.CheckToolID(&v, "tool_id", toolID)
	checkText(&v, textField, text, maxText)
	return p, v.Err()
}

// ApproveTool implements RegistryService.ApproveTool.
func (s *Server) ApproveTool(ctx context.Context, req *registryv1.ApproveToolRequest) (*registryv1.ApproveToolResponse, error) {
	p, err := toolAction(ctx, req.GetToolId(), "comment", req.GetComment())
	if err != nil {
		return nil, err
	}
	if d := req.GetApprovalDigest(); !canonical.ValidDigest(d) {
		return nil, apierror.InvalidArgument(apierror.FieldViolation{Field: "approval_digest",
			Description: "required: the sha256:<hex> approval digest shown for the tool"})
	}
	t, err := s.store.ApproveTool(ctx, p, viewOf(p), req.GetToolId(), req.GetApprovalDigest(), req.GetComment())
	if err != nil {
		return nil, translate(err)
	}
	return &registryv1.ApproveToolResponse{Tool: t}, nil
}

// EnableTool implements RegistryService.EnableTool.
func (s *Server) EnableTool(ctx context.Context, req *registryv1.EnableToolRequest) (*registryv1.EnableToolResponse, error) {
	p, err := toolAction(ctx, req.GetToolId(), "", "")
	if err != nil {
		return nil, err
	}
	t, err := s.store.SetEnabled(ctx, p, viewOf(p), req.GetToolId(), true, "")
	if err != nil {
		return nil, translate(err)
	}
	return &registryv1.EnableToolResponse{Tool: t}, nil
}

// DisableTool implements RegistryService.DisableTool.
func (s *Server) DisableTool(ctx context.Context, req *registryv1.DisableToolRequest) (*registryv1.DisableToolResponse, error) {
	p, err := toolAction(ctx, req.GetToolId(), "reason", req.GetReason())
	if err != nil {
		return nil, err
	}
	t, err := s.store.SetEnabled(ctx, p, viewOf(p), req.GetToolId(), false, req.GetReason())
	if err != nil {
		return nil, translate(err)
	}
	return &registryv1.DisableToolResponse{Tool: t}, nil
}

// RollbackTool implements RegistryService.RollbackTool.
func (s *Server) RollbackTool(ctx context.Context, req *registryv1.RollbackToolRequest) (*registryv1.RollbackToolResponse, error) {
	p, err := toolAction(ctx, req.GetToolId(), "reason", req.GetReason())
	if err != nil {
		return nil, err
	}
	t, err := s.store.RollbackTool(ctx, p, viewOf(p), req.GetToolId(), req.GetReason())
	if err != nil {
		return nil, translate(err)
	}
	return &registryv1.RollbackToolResponse{Tool: t}, nil
}

// GetTool implements RegistryService.GetTool.
func (s *Server) GetTool(ctx context.Context, req *registryv1.GetToolRequest) (*registryv1.GetToolResponse, error) {
	p, err := toolAction(ctx, req.GetToolId(), "", "")
	if err != nil {
		return nil, err
	}
	t, history, err := s.store.GetTool(ctx, viewOf(p), req.GetToolId(), req.GetIncludeHistory())
	if err != nil {
		return nil, translate(err)
	}
	return &registryv1.GetToolResponse{Tool: t, History: history}, nil
}

// ListTools implements RegistryService.ListTools.
func (s *Server) ListTools(ctx context.Context, req *registryv1.ListToolsRequest) (*registryv1.ListToolsResponse, error) {
	caller, err := principal.Require(ctx)
	if err != nil {
		return nil, err
	}
	var v apierror.Violations
	if req.GetServerId() != "" {
		checkServerID(&v, "server_id", req.GetServerId())
	}
	if _, ok := registryv1.ReviewState_name[int32(req.GetReviewState())]; !ok {
		v.Add("review_state", "unknown review state %d", req.GetReviewState())
	}
	p := page(&v, req.GetPageSize(), req.GetPageToken())
	if err := v.Err(); err != nil {
		return nil, err
	}
	tools, hasMore, rev, err := s.store.ListTools(ctx, viewOf(caller), store.ToolFilter{ServerID: req.GetServerId(), State: req.GetReviewState()}, p)
	if err != nil {
		return nil, translate(err)
	}
	resp := &registryv1.ListToolsResponse{Tools: tools, Revision: rev}
	if len(tools) > 0 {
		resp.NextPageToken = nextToken(hasMore, tools[len(tools)-1].GetToolId())
	}
	return resp, nil
}

// viewOf is what p may see of tools and servers: everything for platform admins and
// services, its own tenant's audience classes' variants otherwise.
func viewOf(p principal.Principal) store.View {
	return store.View{All: p.Admin || p.Service, Tenant: p.Tenant}
}

// GetToolReview implements RegistryService.GetToolReview.
func (s *Server) GetToolReview(ctx context.Context, req *registryv1.GetToolReviewRequest) (*registryv1.GetToolReviewResponse, error) {
	p, err := principal.Require(ctx)
	if err != nil {
		return nil, err
	}
	var v apierror.Violations
	contract.CheckToolID(&v, "tool_id", req.GetToolId())
	if !canonical.ValidDigest(req.GetDescriptorDigest()) {
		v.Add("descriptor_digest", "required: the sha256:<hex> descriptor digest the plan was made with")
	}
	checkClassName(&v, "audience_class", req.GetAudienceClass())
	if err := v.Err(); err != nil {
		return nil, err
	}
	// Decided from the class name alone, before any lookup: it tells the
	// caller nothing it did not send.
	if view := viewOf(p); !view.All && store.ClassTenant(req.GetAudienceClass()) != view.Tenant {
		return nil, apierror.PermissionDenied("only platform admins and services may ask about another tenant's audience class")
	}
	resp, err := s.store.GetToolReview(ctx, req.GetToolId(), req.GetDescriptorDigest(), req.GetAudienceClass())
	if err != nil {
		return nil, translate(err)
	}
	return resp, nil
}

// GrantScopes implements RegistryService.GrantScopes.
func (s *Server) GrantScopes(ctx context.Context, req *registryv1.GrantScopesRequest) (*registryv1.GrantScopesResponse, error) {
	if _, err := principal.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	g, err := grantChangeWithCondition(req)
	if err != nil {
		return nil, err
	}
	grant, epoch, err := s.store.Grant(ctx, g)
	if err != nil {
		return nil, translate(err)
	}
	return &registryv1.GrantScopesResponse{Grant: grant, PolicyEpoch: epoch}, nil
}

// RevokeScopes implements RegistryService.RevokeScopes.
func (s *Server) RevokeScopes(ctx context.Context, req *registryv1.RevokeScopesRequest) (*registryv1.RevokeScopesResponse, error) {
	if _, err := principal.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	g, err := grantChange(req.GetTenantId(), req.GetSubject(), req.GetGroup(), req.GetScopes(), req.GetAudienceClasses(), false)
	if err != nil {
		return nil, err
	}
	grant, epoch, err := s.store.Revoke(ctx, g)
	if err != nil {
		return nil, translate(err)
	}
	return &registryv1.RevokeScopesResponse{Grant: grant, PolicyEpoch: epoch}, nil
}

// GetPolicy implements RegistryService.GetPolicy.
func (s *Server) GetPolicy(ctx context.Context, req *registryv1.GetPolicyRequest) (*registryv1.GetPolicyResponse, error) {
	p, err := principal.Require(ctx)
	if err != nil {
		return nil, err
	}
	var v apierror.Violations
	checkTenantID(&v, "tenant_id", req.GetTenantId())
	if req.GetAtEpoch() < 0 {
		v.Add("at_epoch", "must be 0 (the current epoch) or a policy epoch, from 1")
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	if !p.SeesTenant(req.GetTenantId()) {
		// Another tenant's policy is answered exactly as an unknown tenant's,
		// before anything (such as its epoch) is looked at.
		return nil, translate(&store.NotFoundError{Kind: "tenant", ID: req.GetTenantId()})
	}
	var (
		policy *registryv1.Policy
		rev    int64
	)
	if req.GetAtEpoch() == 0 {
		policy, rev, err = s.store.GetPolicy(ctx, req.GetTenantId())
	} else {
		policy, rev, err = s.store.GetPolicyAt(ctx, req.GetTenantId(), req.GetAtEpoch())
	}
	if err != nil {
		return nil, translate(err)
	}
	policy.AudienceClasses = redact(p, policy.GetAudienceClasses())
	return &registryv1.GetPolicyResponse{Policy: policy, Revision: rev}, nil
}

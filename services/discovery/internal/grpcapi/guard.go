package grpcapi

import (
	"context"
	"strings"
	"time"
	"unicode"

	"google.golang.org/protobuf/types/known/timestamppb"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/services/discovery/internal/store"
)

// Bounds of the guard RPCs' free text.
const (
	maxEventIDBytes = 256
	maxDetailBytes  = 1024
)

func checkText(v *apierror.Violations, field, s string, n int, required bool) {
	switch {
	case s == "" && required:
		v.Add(field, "required")
	case len(s) > n:
		v.Add(field, "at most %d bytes", n)
	case strings.ContainsFunc(s, unicode.IsControl):
		v.Add(field, "contains a control character")
	}
}

// ReportIncident implements the RPC.
func (s *Server) ReportIncident(ctx context.Context, req *discoveryv1.ReportIncidentRequest) (*discoveryv1.ReportIncidentResponse, error) {
	p, err := principal.Require(ctx)
	if err != nil {
		return nil, err
	}
	if !p.Service {
		return nil, apierror.PermissionDenied("this operation needs a toolcrib service")
	}
	v := pairViolations(req)
	checkText(&v, "event_id", req.GetEventId(), maxEventIDBytes, true)
	if _, ok := discoveryv1.IncidentKind_name[int32(req.GetKind())]; !ok || req.GetKind() == discoveryv1.IncidentKind_INCIDENT_KIND_UNSPECIFIED {
		v.Add("kind", "required, one of the IncidentKind values")
	}
	if req.GetGeneration() < 0 {
		v.Add("generation", "must not be negative")
	}
	if len(req.GetTenantId()) > 64 {
		v.Add("tenant_id", "at most 64 bytes")
	}
	checkText(&v, "detail", req.GetDetail(), maxDetailBytes, false)
	observed := time.Now()
	if o := req.GetObservedAt(); o != nil {
		if !o.IsValid() {
			v.Add("observed_at", "not a valid timestamp")
		} else {
			observed = o.AsTime()
		}
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	if _, err := s.store.Tenant(ctx, req.GetServerId(), req.GetAudienceClass()); err != nil {
		return nil, translate(err)
	}
	in, dup, err := s.store.ReportIncident(ctx, &discoveryv1.Incident{
		EventId: req.GetEventId(), Kind: req.GetKind(), ServerId: req.GetServerId(), AudienceClass: req.GetAudienceClass(),
		Generation: req.GetGeneration(), TenantId: req.GetTenantId(), ObservedAt: timestamppb.New(observed),
		Detail: req.GetDetail(), ReportedBy: p.Subject,
	})
	if err != nil {
		return nil, translate(err)
	}
	return &discoveryv1.ReportIncidentResponse{Incident: in, Duplicate: dup}, nil
}

// ListGuardActions implements the RPC.
func (s *Server) ListGuardActions(ctx context.Context, req *discoveryv1.ListGuardActionsRequest) (*discoveryv1.ListGuardActionsResponse, error) {
	if _, err := principal.RequireAdminOrService(ctx); err != nil {
		return nil, err
	}
	var v apierror.Violations
	if req.GetServerId() != "" {
		checkServer(&v, "server_id", req.GetServerId())
	}
	checkClass(&v, "audience_class", req.GetAudienceClass(), false)
	limit := 100
	switch n := req.GetPageSize(); {
	case n < 0:
		v.Add("page_size", "must not be negative")
	case n > 1000:
		limit = 1000
	case n > 0:
		limit = int(n)
	}
	var before int64
	if t := req.GetPageToken(); t != "" {
		if !decodeToken(t, &before) || before < 1 {
			v.Add("page_token", "not a token of this list")
		}
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	acts, more, err := s.store.ListGuardActions(ctx, store.GuardFilter{ServerID: req.GetServerId(),
		AudienceClass: req.GetAudienceClass(), HeldOnly: req.GetHeldOnly()}, before, limit)
	if err != nil {
		return nil, translate(err)
	}
	out := &discoveryv1.ListGuardActionsResponse{Actions: acts}
	if more && len(acts) > 0 {
		out.NextPageToken = encodeToken(acts[len(acts)-1].GetActionId())
	}
	return out, nil
}

// ResumeGuard implements the RPC.
func (s *Server) ResumeGuard(ctx context.Context, req *discoveryv1.ResumeGuardRequest) (*discoveryv1.ResumeGuardResponse, error) {
	p, err := principal.RequireAdmin(ctx)
	if err != nil {
		return nil, err
	}
	v := pairViolations(req)
	checkText(&v, "reason", req.GetReason(), maxDetailBytes, true)
	if err := v.Err(); err != nil {
		return nil, err
	}
	acts, err := s.store.ResumeGuard(ctx, req.GetServerId(), req.GetAudienceClass(), p.Subject, req.GetReason())
	if err != nil {
		return nil, translate(err)
	}
	return &discoveryv1.ResumeGuardResponse{Resumed: acts}, nil
}

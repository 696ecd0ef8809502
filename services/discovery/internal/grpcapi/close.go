package grpcapi

import (
	"context"
	"errors"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/ids"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/services/discovery/internal/store"
	"github.com/toolcrib/toolcrib/services/discovery/registryclient"
)

// ClosePointer implements the RPC: a platform admin, a service, or the
// server's owner for its own tenant's class closes the pointer by CAS.
// The lease service's freeze follows from the CLOSE move on the Watch
// stream, as for a rollback that closes.
func (s *Server) ClosePointer(ctx context.Context, req *discoveryv1.ClosePointerRequest) (*discoveryv1.ClosePointerResponse, error) {
	p, err := principal.Require(ctx)
	if err != nil {
		return nil, err
	}
	v := pairViolations(req)
	if req.GetExpectedGeneration() < 1 {
		v.Add("expected_generation", "required, from 1")
	}
	if req.GetReason() == "" {
		v.Add("reason", "required")
	}
	checkReason(&v, req.GetReason())
	if err := v.Err(); err != nil {
		return nil, err
	}
	server, class := req.GetServerId(), req.GetAudienceClass()
	// Another tenant's class looks exactly as if it did not exist.
	if !visible(p, ids.TenantOfClass(class)) {
		return nil, translate(notFound("audience class", class))
	}
	if !p.Admin && !p.Service {
		b, err := s.scans.Binding(ctx, server, class)
		switch {
		case errors.Is(err, registryclient.ErrNotFound):
			return nil, translate(notFound("server or audience class", store.PointerID(server, class)))
		case err != nil:
			return nil, translate(err)
		case !visible(p, b.TenantID):
			return nil, translate(notFound("audience class", class))
		case !(p.Owns(b.Server.GetOwner()) && p.Tenant == b.TenantID):
			return nil, apierror.PermissionDenied("closing a pointer needs a platform admin or the server's owner")
		}
	}
	c, err := s.store.Close(ctx, server, class, req.GetExpectedGeneration(), req.GetReason())
	if err != nil {
		return nil, translate(err)
	}
	return &discoveryv1.ClosePointerResponse{Pointer: c.Pointer, Receipt: c.Receipt}, nil
}

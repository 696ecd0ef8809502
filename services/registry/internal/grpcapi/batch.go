package grpcapi

import (
	"context"
	"errors"
	"fmt"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/canonical"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/services/registry/internal/store"
)

// maxBatch is the most pairs GetBindings reads and the most pins
// PinIdentities sets in one call.
const maxBatch = 256

// requireWorker admits platform admins and services (a discovery worker).
func requireWorker(ctx context.Context) error {
	p, err := principal.Require(ctx)
	if err != nil {
		return err
	}
	if !p.Admin && !p.Service {
		return apierror.PermissionDenied("this operation needs a platform admin or a service")
	}
	return nil
}

// checkBatch checks a batch's size.
func checkBatch(v *apierror.Violations, field string, n int) {
	if n == 0 || n > maxBatch {
		v.Add(field, "1 to %d entries, got %d", maxBatch, n)
	}
}

// GetBindings implements RegistryService.GetBindings.
func (s *Server) GetBindings(ctx context.Context, req *registryv1.GetBindingsRequest) (*registryv1.GetBindingsResponse, error) {
	if err := requireWorker(ctx); err != nil {
		return nil, err
	}
	var v apierror.Violations
	checkBatch(&v, "reads", len(req.GetReads()))
	reads := make([]store.BindingRead, len(req.GetReads()))
	for i, r := range req.GetReads() {
		checkServerID(&v, fmt.Sprintf("reads[%d].server_id", i), r.GetServerId())
		checkClassName(&v, fmt.Sprintf("reads[%d].audience_class", i), r.GetAudienceClass())
		reads[i] = store.BindingRead{ServerID: r.GetServerId(), AudienceClass: r.GetAudienceClass()}
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	got, err := s.store.GetBindings(ctx, reads)
	if err != nil {
		return nil, translate(err)
	}
	out := &registryv1.GetBindingsResponse{Results: make([]*registryv1.BindingResult, len(got))}
	for i, g := range got {
		var nf *store.NotFoundError
		if errors.As(g.Err, &nf) {
			out.Results[i] = &registryv1.BindingResult{NotFound: nf.Kind}
			continue
		}
		b := g.Binding
		out.Results[i] = &registryv1.BindingResult{Binding: &registryv1.GetBindingResponse{Server: b.Server, Binding: b.Binding,
			TenantId: b.TenantID, PolicyEpoch: b.PolicyEpoch, Revision: b.Revision}}
	}
	return out, nil
}

// PinIdentities implements RegistryService.PinIdentities.
func (s *Server) PinIdentities(ctx context.Context, req *registryv1.PinIdentitiesRequest) (*registryv1.PinIdentitiesResponse, error) {
	if err := requireWorker(ctx); err != nil {
		return nil, err
	}
	var v apierror.Violations
	checkBatch(&v, "pins", len(req.GetPins()))
	pins := make([]store.Pin, len(req.GetPins()))
	for i, p := range req.GetPins() {
		checkServerID(&v, fmt.Sprintf("pins[%d].server_id", i), p.GetServerId())
		if p.GetExpectedVersion() <= 0 {
			v.Add(fmt.Sprintf("pins[%d].expected_version", i), "required: the version you read")
		}
		if !canonical.ValidDigest(p.GetIdentityPin()) {
			v.Add(fmt.Sprintf("pins[%d].identity_pin", i), "must be sha256:<64 lowercase hex digits>")
		}
		pins[i] = store.Pin{ServerID: p.GetServerId(), ExpectedVersion: p.GetExpectedVersion(), IdentityPin: p.GetIdentityPin()}
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	res, err := s.store.PinIdentities(ctx, pins)
	if err != nil {
		return nil, translate(err)
	}
	return &registryv1.PinIdentitiesResponse{Results: res}, nil
}

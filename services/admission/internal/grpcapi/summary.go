package grpcapi

import (
	"context"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/services/admission/internal/decision"
)

// maxServerIDBytes bounds SummarizeDecisions' server id (a tool id is
// `<server>.<name>`, so no server id is longer).
const maxServerIDBytes = decision.MaxToolIDBytes

// SummarizeDecisions implements AdmissionService.SummarizeDecisions.
func (s *Server) SummarizeDecisions(ctx context.Context, req *admissionv1.SummarizeDecisionsRequest) (*admissionv1.SummarizeDecisionsResponse, error) {
	if _, err := principal.RequireAdminOrService(ctx); err != nil {
		return nil, err
	}
	var v apierror.Violations
	if n := len(req.GetServerId()); n == 0 || n > maxServerIDBytes {
		v.Add("server_id", "required, at most 200 bytes")
	}
	if n := len(req.GetAudienceClass()); n == 0 || n > decision.MaxClassBytes {
		v.Add("audience_class", "required, at most 127 bytes")
	}
	if req.GetGeneration() < 1 {
		v.Add("generation", "required, from 1")
	}
	if req.GetSince() == nil || req.GetSince().CheckValid() != nil {
		v.Add("since", "required, a valid timestamp")
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	sum, err := s.o.Receipts.Summarize(ctx, req.GetServerId(), req.GetAudienceClass(), req.GetGeneration(), req.GetSince().AsTime())
	if err != nil {
		return nil, translate(unavailable(err))
	}
	out := &admissionv1.SummarizeDecisionsResponse{Checks: sum.Checks, Truncated: sum.Truncated}
	for _, t := range sum.Tools {
		out.Tools = append(out.Tools, &admissionv1.ToolDenials{ToolId: t.ToolID, NotFound: t.NotFound, StaleCatalog: t.StaleCatalog})
	}
	return out, nil
}

package grpcapi

import (
	"context"
	"time"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/ids"
	"github.com/toolcrib/toolcrib/platform/principal"
)

// MaxCountWindow bounds how far back CountDecisions' `since` may be: the
// console's "recent" decisions, and a bound on the rows one call reads.
const MaxCountWindow = 7 * 24 * time.Hour

// countClockSkew is how far in the future a `since` may be before it is
// refused: a caller's clock a little ahead of the replica's is not an
// error.
const countClockSkew = 5 * time.Second

// CountDecisions implements AdmissionService.CountDecisions.
func (s *Server) CountDecisions(ctx context.Context, req *admissionv1.CountDecisionsRequest) (*admissionv1.CountDecisionsResponse, error) {
	p, err := principal.Require(ctx)
	if err != nil {
		return nil, err
	}
	var v apierror.Violations
	if !ids.ValidToolID(req.GetToolId()) {
		v.Add("tool_id", "required, a tool id <server>.<name>")
	}
	now := time.Now()
	var since time.Time
	switch {
	case req.GetSince() == nil || req.GetSince().CheckValid() != nil:
		v.Add("since", "required, a valid timestamp")
	default:
		since = req.GetSince().AsTime()
		if since.After(now.Add(countClockSkew)) {
			v.Add("since", "in the future")
		} else if since.Before(now.Add(-MaxCountWindow)) {
			v.Add("since", "more than 7 days back")
		}
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	all := p.Admin || p.Service
	counts, err := s.o.Receipts.CountByReason(ctx, req.GetToolId(), p.Tenant, all, since)
	if err != nil {
		return nil, translate(unavailable(err))
	}
	out := &admissionv1.CountDecisionsResponse{AllTenants: all}
	for _, c := range counts {
		out.Reasons = append(out.Reasons, &admissionv1.ReasonCount{Reason: c.Reason, Count: c.Count})
		out.Total += c.Count
	}
	return out, nil
}

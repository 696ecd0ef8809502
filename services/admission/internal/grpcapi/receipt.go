package grpcapi

import (
	"context"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/principal"
)

// ReasonReceiptNotFound is the ErrorInfo reason of GetReceipt's NOT_FOUND:
// no receipt with that id, another principal's, or older than the lookup
// window (one answer for all three).
const ReasonReceiptNotFound = "RECEIPT_NOT_FOUND"

// GetReceipt implements AdmissionService.GetReceipt.
func (s *Server) GetReceipt(ctx context.Context, req *admissionv1.GetReceiptRequest) (*admissionv1.GetReceiptResponse, error) {
	p, err := principal.Require(ctx)
	if err != nil {
		return nil, err
	}
	id := req.GetReceiptId()
	if _, perr := uuid.Parse(id); perr != nil || len(id) != 36 {
		return nil, apierror.InvalidArgument(apierror.FieldViolation{Field: "receipt_id", Description: "must be a UUID"})
	}
	r, err := s.o.Receipts.Lookup(ctx, id, p.Tenant, p.Subject)
	if err != nil {
		return nil, translate(err)
	}
	validUntil := r.GetDecidedAt().AsTime().Add(s.o.CacheTTL)
	if fu := s.o.Heads.FreshUntil(); fu.Before(validUntil) {
		validUntil = fu // zero (never fresh) is in the past too
	}
	if ptr, ok := s.o.Heads.Pointer(r.GetServerId(), r.GetAudienceClass()); ok {
		validUntil = earliest(validUntil, ptr.FreshUntil)
	}
	return &admissionv1.GetReceiptResponse{Receipt: r, ValidUntil: timestamppb.New(validUntil)}, nil
}

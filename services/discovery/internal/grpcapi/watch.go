package grpcapi

import (
	"context"
	"encoding/json"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/services/discovery/internal/store"
)

// Watch implements the RPC: every pointer change after from_revision from
// the change log, then new ones as they commit, with a heartbeat every
// interval. It ends with UNAVAILABLE (reason DRAINING) when the server
// drains, so a client reconnects elsewhere and resumes.
func (s *Server) Watch(req *discoveryv1.WatchRequest, stream discoveryv1.DiscoveryService_WatchServer) error {
	p, err := principal.Require(stream.Context())
	if err != nil {
		return err
	}
	if req.GetFromRevision() < 0 {
		return apierror.InvalidArgument(apierror.FieldViolation{Field: "from_revision", Description: "must not be negative"})
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	drained := make(chan struct{})
	go func() {
		select {
		case <-s.draining:
			close(drained)
			cancel()
		case <-ctx.Done():
		}
	}()
	err = s.log.Watch(ctx, req.GetFromRevision(), s.heartbeat, func(ev changelog.Event) error {
		if ev.Entry == nil {
			return stream.Send(&discoveryv1.WatchResponse{Event: &discoveryv1.WatchResponse_Heartbeat{
				Heartbeat: &catalogv1.Heartbeat{Revision: ev.Head, SentAt: timestamppb.New(ev.SentAt)}}})
		}
		ch, err := store.DecodeChange(*ev.Entry)
		if err != nil {
			return err
		}
		if !visible(p, ch.GetPointer().GetTenantId()) {
			return nil
		}
		return stream.Send(&discoveryv1.WatchResponse{Event: &discoveryv1.WatchResponse_Change{Change: ch}})
	})
	select {
	case <-drained:
		return &apierror.Error{Code: codes.Unavailable, Reason: "DRAINING", Message: "the server is shutting down; resume the watch from the last revision received"}
	default:
	}
	switch {
	case errors.Is(err, changelog.ErrCompacted):
		return apierror.FailedPrecondition("REVISION_COMPACTED", "the revision is no longer kept: re-read the pointers and watch from the revision they returned")
	case errors.Is(err, changelog.ErrAhead):
		return apierror.FailedPrecondition("REVISION_AHEAD", "the revision is ahead of the change log")
	case err == nil, stream.Context().Err() != nil:
		return nil
	}
	return err // INTERNAL at the interceptor, which logs it
}

// describe fills the descriptor fields derived from the raw JSON (stored
// once, verbatim): title, description and annotations.
func describe(t *catalogv1.ToolDescriptor) {
	var d struct {
		Title       string `json:"title"`
		Description string `json:"description"`
		Annotations *struct {
			ReadOnly    *bool  `json:"readOnlyHint"`
			Destructive *bool  `json:"destructiveHint"`
			Idempotent  *bool  `json:"idempotentHint"`
			OpenWorld   *bool  `json:"openWorldHint"`
			Title       string `json:"title"`
		} `json:"annotations"`
	}
	if json.Unmarshal(t.GetRaw(), &d) != nil {
		return
	}
	t.Title, t.Description = d.Title, d.Description
	if a := d.Annotations; a != nil {
		t.Annotations = &catalogv1.ToolAnnotations{ReadOnlyHint: a.ReadOnly, DestructiveHint: a.Destructive,
			IdempotentHint: a.Idempotent, OpenWorldHint: a.OpenWorld, Title: a.Title}
	}
}

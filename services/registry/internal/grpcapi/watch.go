package grpcapi

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/services/registry/internal/store"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// Watch implements RegistryService.Watch: every change after from_revision
// in commit order, then new ones as they commit, with a heartbeat every
// Options.Heartbeat; the stream ends with OK when the server drains.
func (s *Server) Watch(req *registryv1.WatchRequest, stream registryv1.RegistryService_WatchServer) error {
	if _, err := principal.RequireAdminOrService(stream.Context()); err != nil {
		return err
	}
	from := req.GetFromRevision()
	if from < 0 {
		return apierror.InvalidArgument(apierror.FieldViolation{Field: "from_revision", Description: "must not be negative"})
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	go func() {
		select {
		case <-s.opts.Draining:
			cancel()
		case <-ctx.Done():
		}
	}()
	if from == 0 {
		oldest, err := s.store.OldestRevision(ctx)
		if err != nil {
			return err
		}
		from = oldest - 1
	}
	err := s.store.Log().Watch(ctx, from, s.opts.Heartbeat, func(ev changelog.Event) error {
		if ev.Entry == nil {
			return stream.Send(&registryv1.WatchResponse{Event: &registryv1.WatchResponse_Heartbeat{
				Heartbeat: &catalogv1.Heartbeat{Revision: ev.Head, SentAt: timestamppb.New(ev.SentAt)}}})
		}
		ch, err := store.DecodeChange(*ev.Entry)
		if err != nil {
			return err
		}
		return stream.Send(&registryv1.WatchResponse{Event: &registryv1.WatchResponse_Change{Change: ch}})
	})
	select {
	case <-s.opts.Draining:
		return nil // shutting down: end the stream cleanly; the client resumes elsewhere
	default:
	}
	switch {
	case errors.Is(err, changelog.ErrCompacted):
		e := apierror.FailedPrecondition("REVISION_COMPACTED", fmt.Sprintf(
			"changes after revision %d are no longer kept: re-list (ListServers, ListAudienceClasses, ListTools, GetPolicy) "+
				"and watch from the revision the lists return", req.GetFromRevision()))
		e.Metadata = map[string]string{"from_revision": fmt.Sprint(req.GetFromRevision())}
		return e
	case errors.Is(err, changelog.ErrAhead):
		return apierror.FailedPrecondition("REVISION_AHEAD", fmt.Sprintf(
			"revision %d is ahead of this registry's log (restored from a backup?): re-list and watch from the revision the lists return",
			req.GetFromRevision()))
	}
	return err
}

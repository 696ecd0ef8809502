package grpcapi

import (
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/services/registry/internal/store"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// relist names what a client re-reads after REVISION_COMPACTED.
const relist = "ListServers, ListAudienceClasses, ListTools, GetPolicy"

// Watch implements RegistryService.Watch with the shared Watch server
// ([changelog.Server]): a tenant principal sees only its tenant's changes,
// admins and services every change; drain ends the stream with UNAVAILABLE
// DRAINING.
func (s *Server) Watch(req *registryv1.WatchRequest, stream registryv1.RegistryService_WatchServer) error {
	p, err := principal.Require(stream.Context())
	if err != nil {
		return err
	}
	viewer, err := changelog.ViewerOf(p)
	if err != nil {
		return err
	}
	srv := changelog.Server{Feed: s.store.Log(), Heartbeat: s.opts.Heartbeat, Draining: s.opts.Draining, Relist: relist}
	return srv.Serve(stream.Context(), viewer, req.GetFromRevision(), func(ev changelog.Event) error {
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
}

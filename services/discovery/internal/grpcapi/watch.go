package grpcapi

import (
	"encoding/json"
	"errors"

	"google.golang.org/protobuf/types/known/timestamppb"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/services/discovery/internal/store"
)

// relist names what a client re-reads after REVISION_COMPACTED.
const relist = "GetActiveSnapshot of each (server, audience class)"

// Watch implements the RPC with the shared Watch server
// ([changelog.Server]): a tenant principal sees only the moves of its
// tenant's audience classes, admins and services every move; drain ends
// the stream with UNAVAILABLE DRAINING.
func (s *Server) Watch(req *discoveryv1.WatchRequest, stream discoveryv1.DiscoveryService_WatchServer) error {
	p, err := principal.Require(stream.Context())
	if err != nil {
		return err
	}
	viewer, err := changelog.ViewerOf(p)
	if err != nil {
		return err
	}
	srv := changelog.Server{Feed: s.log, Heartbeat: s.heartbeat, Draining: s.draining, Relist: relist}
	err = srv.Serve(stream.Context(), viewer, req.GetFromRevision(), func(ev changelog.Event) error {
		if ev.Entry == nil {
			return stream.Send(&discoveryv1.WatchResponse{Event: &discoveryv1.WatchResponse_Heartbeat{
				Heartbeat: &catalogv1.Heartbeat{Revision: ev.Head, SentAt: timestamppb.New(ev.SentAt)}}})
		}
		ch, err := store.DecodeChange(*ev.Entry)
		if err != nil {
			return err
		}
		return stream.Send(&discoveryv1.WatchResponse{Event: &discoveryv1.WatchResponse_Change{Change: ch}})
	})
	var api *apierror.Error
	if err == nil || errors.As(err, &api) {
		return err
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

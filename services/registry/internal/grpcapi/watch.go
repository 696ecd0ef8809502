package grpcapi

import (
	"google.golang.org/protobuf/proto"
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
		return stream.Send(&registryv1.WatchResponse{Event: &registryv1.WatchResponse_Change{Change: forViewer(p, ch)}})
	})
}

// forViewer cuts a change down to what p may read through the other RPCs:
// the changelog already sends a tenant principal only changes that concern
// its tenant, but a tool's change carries every audience class's variant
// and an audience class's change its secret references. A tenant principal
// gets only its own classes' variants (and the approvals of their
// descriptors), with the tool-level descriptor fields taken from one of
// them, and no secret references.
func forViewer(p principal.Principal, ch *registryv1.Change) *registryv1.Change {
	if p.Admin || p.Service {
		return ch
	}
	switch o := ch.GetObject().(type) {
	case *registryv1.Change_AudienceClass:
		out := proto.Clone(ch).(*registryv1.Change)
		out.Object = &registryv1.Change_AudienceClass{AudienceClass: redact(p, []*registryv1.AudienceClass{o.AudienceClass})[0]}
		return out
	case *registryv1.Change_Tool:
		out := proto.Clone(ch).(*registryv1.Change)
		out.Object = &registryv1.Change_Tool{Tool: toolForTenant(o.Tool, p.Tenant)}
		return out
	}
	return ch
}

// toolForTenant returns a copy of t holding only tenant's variants.
func toolForTenant(t *registryv1.Tool, tenant string) *registryv1.Tool {
	c := proto.Clone(t).(*registryv1.Tool)
	c.Variants, c.Approvals = nil, nil
	digests := map[string]bool{}
	for _, v := range t.GetVariants() {
		if tenant != "" && v.GetTenantId() == tenant {
			c.Variants = append(c.Variants, proto.Clone(v).(*registryv1.ToolVariant))
			digests[v.GetDescriptorDigest()] = true
		}
	}
	for _, a := range t.GetApprovals() {
		if digests[a.GetDescriptorDigest()] {
			c.Approvals = append(c.Approvals, proto.Clone(a).(*registryv1.ApprovedVersion))
		}
	}
	if !digests[c.GetDescriptorDigest()] {
		c.DescriptorDigest, c.DescriptorRaw, c.ApprovalDigest, c.PresentAtSource = "", nil, "", false
		c.ReviewState = registryv1.ReviewState_REVIEW_STATE_UNSPECIFIED
		if len(c.Variants) > 0 {
			v := c.Variants[0]
			c.DescriptorDigest, c.DescriptorRaw, c.ApprovalDigest = v.GetDescriptorDigest(), v.GetDescriptorRaw(), v.GetApprovalDigest()
			c.PresentAtSource, c.ReviewState = v.GetPresentAtSource(), v.GetReviewState()
		}
	}
	return c
}

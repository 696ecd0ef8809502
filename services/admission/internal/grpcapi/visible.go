package grpcapi

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/ids"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/services/admission/internal/cache"
	"github.com/toolcrib/toolcrib/services/admission/internal/decision"
	"github.com/toolcrib/toolcrib/services/admission/internal/replica"
	"github.com/toolcrib/toolcrib/services/admission/internal/search"
)

// ListVisibleTools implements AdmissionService.ListVisibleTools.
func (s *Server) ListVisibleTools(ctx context.Context, req *admissionv1.ListVisibleToolsRequest) (*admissionv1.ListVisibleToolsResponse, error) {
	p, err := principal.Require(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := s.listVisible(ctx, p, req)
	return resp, translate(err)
}

func validateList(req *admissionv1.ListVisibleToolsRequest) error {
	var v apierror.Violations
	if len(req.GetQuery()) > search.MaxQueryBytes {
		v.Add("query", "at most %d bytes", search.MaxQueryBytes)
	}
	if req.GetMaxBytes() < 0 {
		v.Add("max_bytes", "must not be negative")
	}
	if req.GetMaxTools() < 0 {
		v.Add("max_tools", "must not be negative")
	}
	if run := req.GetRunId(); run != "" && !ids.ValidRunID(run) {
		v.Add("run_id", "must be 1-%d letters, digits, '_', '.', ':' or '-'", decision.MaxRunIDBytes)
	}
	if len(req.GetEffectClasses()) > 8 {
		v.Add("effect_classes", "at most 8")
	}
	for _, e := range req.GetEffectClasses() {
		if _, ok := catalogv1.EffectClass_name[int32(e)]; !ok {
			v.Add("effect_classes", "unknown effect class")
			break
		}
	}
	return v.Err()
}

// StalePolicyReason is the FAILED_PRECONDITION reason of ListVisibleTools
// on a replica that cannot prove freshness (I8): it lists nothing rather
// than a stale set.
const StalePolicyReason = "STALE_POLICY"

func (s *Server) listVisible(ctx context.Context, p principal.Principal, req *admissionv1.ListVisibleToolsRequest) (*admissionv1.ListVisibleToolsResponse, error) {
	if err := validateList(req); err != nil {
		return nil, err
	}
	now := s.o.Now()
	if fu := s.o.Heads.FreshUntil(); fu.IsZero() || !now.Before(fu) {
		return nil, apierror.FailedPrecondition(StalePolicyReason, "this replica cannot prove its policy view is fresh; retry shortly")
	}
	set, epoch, servers, err := s.visibleSet(ctx, p, req.GetRunId())
	if err != nil {
		return nil, err
	}
	r := set.Select(search.Filters{Effects: req.GetEffectClasses(), Query: req.GetQuery(),
		MaxBytes: req.GetMaxBytes(), MaxTools: int(req.GetMaxTools())})
	return &admissionv1.ListVisibleToolsResponse{Tools: r.Tools, PolicyEpoch: epoch, Truncated: r.Truncated,
		VisibleSetDigest: r.Digest, VisibleCount: int32(r.Count), Servers: servers}, nil
}

// visibleSet builds (or reuses) the set of tools p may call now in run:
// the tools of the active generations its audience classes read for
// which [decision.Visible] holds — Check, asked for the tool at that
// generation and descriptor, through that class, for run, autonomously,
// would answer ALLOW, CONFIRMATION_REQUIRED or UNVERSIONED_SOURCE. The
// servers it reads (an open, fresh active generation whose rollout stage
// serves the run) are chosen first; no tool of another server can be
// visible, so their generations are not read. Built sets are kept by
// everything they were built from: the epoch fixes every stage, and a
// canary's source is in the key only when the run is inside it.
func (s *Server) visibleSet(ctx context.Context, p principal.Principal, run string) (*search.Set, int64, []*admissionv1.VisibleServer, error) {
	epoch, err := s.epochOf(ctx, p.Tenant)
	if errors.Is(err, replica.ErrNotFound) {
		return search.Build(nil), 0, nil, nil
	}
	if err != nil {
		return nil, 0, nil, unavailable(err)
	}
	pol, err := s.policy(ctx, p.Tenant, epoch)
	if err != nil {
		return nil, 0, nil, err
	}
	epoch = pol.Epoch
	access := decision.Effective(pol.Grants, p.Subject, p.Groups)
	// plain is the access the grants without a condition give: a tool it
	// does not cover is listed as conditional.
	plain := decision.Effective(decision.Unconditional(pol.Grants), p.Subject, p.Groups)
	now := s.o.Now()
	type src struct {
		class   string
		ptr     replica.Pointer
		pointer decision.Pointer
		rollout *decision.Rollout
	}
	var srcs []src
	var key strings.Builder
	key.WriteString(strconv.Itoa(len(p.Tenant)) + ":" + p.Tenant + "|" + strconv.FormatInt(epoch, 10) + "|" + cache.ScopeSetDigest(access, nil) +
		"|" + cache.ScopeSetDigest(plain, nil))
	for _, c := range access.Classes {
		servers := slices.Clone(pol.Classes[c])
		slices.Sort(servers)
		for _, srv := range servers {
			ro := pol.Rollout(srv, c)
			if ro.Shadow() || (ro.Canary() && ro.RunOf(srv, c, run) != decision.RunInside) {
				continue // as Check: not served to this run through c
			}
			ptr, ok := s.o.Heads.Pointer(srv, c)
			if !ok {
				got, err := s.o.Pointers.Pointer(ctx, srv, c)
				if errors.Is(err, replica.ErrNotFound) {
					continue
				}
				if err != nil {
					return nil, 0, nil, unavailable(err)
				}
				s.o.Heads.SetPointer(got)
				ptr, _ = s.o.Heads.Pointer(srv, c)
			}
			if ptr.Closed || !now.Before(ptr.FreshUntil) {
				continue
			}
			srcs = append(srcs, src{c, ptr, decision.Pointer{Generation: ptr.Generation, Closed: ptr.Closed,
				Unversioned: ptr.Unversioned, FreshUntil: ptr.FreshUntil}, ro})
			key.WriteString("|" + c + "/" + srv + "@" + strconv.FormatInt(ptr.Revision, 10))
		}
	}
	servers := make([]*admissionv1.VisibleServer, len(srcs))
	for i, sr := range srcs {
		servers[i] = &admissionv1.VisibleServer{ServerId: sr.ptr.ServerID, AudienceClass: sr.class}
	}
	if set, ok := s.sets.Get(key.String()); ok {
		return set, epoch, servers, nil
	}
	var tools []search.Tool
	freshUntil := s.o.Heads.FreshUntil()
	for _, sr := range srcs {
		gen, err := s.o.Material.Generation(ctx, sr.ptr.ServerID, sr.class, sr.ptr.Generation)
		if err != nil {
			return nil, 0, nil, unavailable(err)
		}
		ids := make([]string, 0, len(gen.Tools))
		for id := range gen.Tools {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			t := gen.Tools[id]
			rv, err := s.o.Material.Review(ctx, p.Tenant, epoch, sr.class, id, t.DescriptorDigest)
			if err != nil {
				return nil, 0, nil, unavailable(err)
			}
			active := &decision.Tool{DescriptorDigest: t.DescriptorDigest, InputSchemaDigest: t.InputSchemaDigest}
			if !decision.Visible(decision.Facts{
				Now:              now,
				Request:          decision.ListingRequest(id, sr.ptr.Generation, t.DescriptorDigest, sr.class, run),
				Tenant:           p.Tenant,
				PolicyFreshUntil: freshUntil,
				Reachable:        true,
				Class:            sr.class,
				Pointer:          &sr.pointer,
				ActiveTool:       active,
				PlanTool:         active,
				Review:           rv,
				Current:          access,
				Rollout:          sr.rollout,
			}) {
				continue
			}
			state := catalogv1.DiscoveryState_DISCOVERY_STATE_ELIGIBLE
			if sr.ptr.Unversioned {
				state = catalogv1.DiscoveryState_DISCOVERY_STATE_UNVERSIONED_OBSERVATION
			}
			tools = append(tools, search.Tool{
				ToolID: id, ServerID: sr.ptr.ServerID, Name: t.Name, Title: t.Title, Description: t.Description,
				InputSchema: t.InputSchema, AudienceClass: sr.class, Generation: sr.ptr.Generation,
				DescriptorDigest: t.DescriptorDigest, Effect: rv.Approved.Effect, SourceState: state,
				ConfirmationRequired: decision.ConfirmationNeeded(*rv.Approved, rv.Trust),
				Conditional:          plain.Conditional(rv.Approved.Scope, sr.class),
			})
		}
	}
	set := search.Build(tools)
	s.sets.Add(key.String(), set)
	return set, epoch, servers, nil
}

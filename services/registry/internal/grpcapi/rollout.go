package grpcapi

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/services/registry/internal/store"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// Canary defaults: seed 000 opens a catalog "to read-only tools for 5 % of
// sessions".
const (
	DefaultCanaryPercent = 5
	maxPercent           = 100
)

// DefaultCanaryEffects are the effect classes a canary admits when none
// are named.
var DefaultCanaryEffects = []catalogv1.EffectClass{catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY}

// rolloutSet validates a SetRolloutStage request into a [store.RolloutSet].
func rolloutSet(req *registryv1.SetRolloutStageRequest) (store.RolloutSet, error) {
	var v apierror.Violations
	checkServerID(&v, "server_id", req.GetServerId())
	checkClassName(&v, "audience_class", req.GetAudienceClass())
	set := store.RolloutSet{ServerID: req.GetServerId(), AudienceClass: req.GetAudienceClass(), Stage: req.GetStage(),
		Reason: strings.TrimSpace(req.GetReason()), ExpectedVersion: req.GetExpectedVersion()}
	switch req.GetStage() {
	case registryv1.Stage_STAGE_SHADOW, registryv1.Stage_STAGE_FULL:
		if req.CanaryPercent != nil {
			v.Add("canary_percent", "only a CANARY stage has a percentage")
		}
		if len(req.GetCanaryEffects()) > 0 {
			v.Add("canary_effects", "only a CANARY stage has effect classes")
		}
	case registryv1.Stage_STAGE_CANARY:
		set.Percent = DefaultCanaryPercent
		if req.CanaryPercent != nil {
			set.Percent = req.GetCanaryPercent()
		}
		if set.Percent < 0 || set.Percent > maxPercent {
			v.Add("canary_percent", "must be a percentage from 0 to 100")
		}
		for i, e := range req.GetCanaryEffects() {
			if _, known := catalogv1.EffectClass_name[int32(e)]; !known || e == catalogv1.EffectClass_EFFECT_CLASS_UNSPECIFIED {
				v.Add(fmt.Sprintf("canary_effects[%d]", i), "unknown effect class %d", int32(e))
				continue
			}
			set.Effects = append(set.Effects, e)
		}
		if len(req.GetCanaryEffects()) == 0 {
			set.Effects = slices.Clone(DefaultCanaryEffects)
		}
		slices.Sort(set.Effects)
		set.Effects = slices.Compact(set.Effects)
	default:
		v.Add("stage", "required: SHADOW, CANARY or FULL")
	}
	switch {
	case set.Reason == "":
		v.Add("reason", "required: why the stage changes (recorded in the history)")
	default:
		checkText(&v, "reason", req.GetReason(), maxText)
	}
	if req.GetExpectedVersion() < 0 {
		v.Add("expected_version", "must be 0 (no check) or the version you read")
	}
	return set, v.Err()
}

// SetRolloutStage implements RegistryService.SetRolloutStage.
func (s *Server) SetRolloutStage(ctx context.Context, req *registryv1.SetRolloutStageRequest) (*registryv1.SetRolloutStageResponse, error) {
	p, err := principal.Require(ctx)
	if err != nil {
		return nil, err
	}
	set, err := rolloutSet(req)
	if err != nil {
		return nil, err
	}
	if p.Service {
		return nil, apierror.PermissionDenied("only a platform admin or the server's owner may set a rollout stage")
	}
	st, epoch, changed, err := s.store.SetRolloutStage(ctx, p, set)
	if err != nil {
		return nil, translate(err)
	}
	return &registryv1.SetRolloutStageResponse{RolloutStage: st, PolicyEpoch: epoch, Changed: changed}, nil
}

// GetRolloutStage implements RegistryService.GetRolloutStage.
func (s *Server) GetRolloutStage(ctx context.Context, req *registryv1.GetRolloutStageRequest) (*registryv1.GetRolloutStageResponse, error) {
	p, err := principal.Require(ctx)
	if err != nil {
		return nil, err
	}
	var v apierror.Violations
	checkServerID(&v, "server_id", req.GetServerId())
	checkClassName(&v, "audience_class", req.GetAudienceClass())
	if err := v.Err(); err != nil {
		return nil, err
	}
	if !p.SeesTenant(store.ClassTenant(req.GetAudienceClass())) {
		// Another tenant's class is answered exactly as a missing one, before
		// any lookup.
		return nil, translate(&store.NotFoundError{Kind: "audience class", ID: req.GetAudienceClass()})
	}
	st, hist, err := s.store.GetRolloutStage(ctx, req.GetServerId(), req.GetAudienceClass(), req.GetIncludeHistory())
	if err != nil {
		return nil, translate(err)
	}
	return &registryv1.GetRolloutStageResponse{RolloutStage: st, History: hist}, nil
}

// ListRolloutStages implements RegistryService.ListRolloutStages.
func (s *Server) ListRolloutStages(ctx context.Context, req *registryv1.ListRolloutStagesRequest) (*registryv1.ListRolloutStagesResponse, error) {
	caller, err := principal.Require(ctx)
	if err != nil {
		return nil, err
	}
	var v apierror.Violations
	if req.GetTenantId() != "" {
		checkTenantID(&v, "tenant_id", req.GetTenantId())
	}
	if req.GetServerId() != "" {
		checkServerID(&v, "server_id", req.GetServerId())
	}
	if req.GetAudienceClass() != "" {
		checkClassName(&v, "audience_class", req.GetAudienceClass())
	}
	pg := page(&v, req.GetPageSize(), req.GetPageToken())
	if err := v.Err(); err != nil {
		return nil, err
	}
	f := store.StageFilter{TenantID: req.GetTenantId(), ServerID: req.GetServerId(), AudienceClass: req.GetAudienceClass()}
	if !caller.Admin && !caller.Service {
		// As ListAudienceClasses: a tenant principal lists only its own
		// tenant; another tenant matches nothing, as an unknown one does.
		if f.TenantID == "" {
			f.TenantID = caller.Tenant
		}
		if !caller.SeesTenant(f.TenantID) {
			f.TenantID = noTenant
		}
	}
	list, hasMore, rev, err := s.store.ListRolloutStages(ctx, f, pg)
	if err != nil {
		return nil, translate(err)
	}
	resp := &registryv1.ListRolloutStagesResponse{RolloutStages: list, Revision: rev}
	if len(list) > 0 {
		resp.NextPageToken = nextToken(hasMore, store.StageKey(list[len(list)-1]))
	}
	return resp, nil
}

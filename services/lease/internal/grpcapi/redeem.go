package grpcapi

import (
	"context"

	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/revision/lease"

	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
)

// Redeem implements LeaseService.Redeem: the executor verified the lease
// and its proof offline (the executor kit), so only what it cannot know is
// checked here — revocation, freeze, freshness — and the lease id is
// consumed, exactly as Verify does after its signature checks ([accept]).
func (s *Server) Redeem(ctx context.Context, req *leasev1.RedeemRequest) (*leasev1.RedeemResponse, error) {
	resp, err := s.redeem(ctx, req)
	if err == nil && s.opts.Metrics != nil {
		s.opts.Metrics.Redeemed(lease.Failure(resp.GetFailure()))
	}
	return resp, err
}

func (s *Server) redeem(ctx context.Context, req *leasev1.RedeemRequest) (*leasev1.RedeemResponse, error) {
	svc, err := principal.RequireService(ctx)
	if err != nil {
		return nil, err
	}
	pc := req.GetClaims()
	var v apierror.Violations
	if pc == nil {
		v.Add("claims", "required: the lease's claims as the executor verified them")
		return nil, v.Err()
	}
	checkID(&v, "claims.lease_id", pc.GetLeaseId())
	checkID(&v, "claims.subject", pc.GetSubject())
	checkID(&v, "claims.tool_id", pc.GetToolId())
	checkID(&v, "claims.server_id", pc.GetServerId())
	checkID(&v, "claims.descriptor_digest", pc.GetDescriptorDigest())
	if t := pc.GetTenantId(); t != "" {
		checkID(&v, "claims.tenant_id", t)
	}
	if c := pc.GetAudienceClass(); c != "" {
		checkID(&v, "claims.audience_class", c)
	}
	if pc.GetGeneration() < 1 {
		v.Add("claims.generation", "must be at least 1")
	}
	if pc.GetPolicyEpoch() < 0 {
		v.Add("claims.policy_epoch", "must not be negative")
	}
	if !pc.GetIssuedAt().IsValid() || !pc.GetExpiresAt().IsValid() {
		v.Add("claims.expires_at", "issued_at and expires_at are required")
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	// An executor redeems only the leases addressed to it: another
	// service holding a lease's claims cannot use it up (nothing is
	// consumed; the audience is not echoed).
	if s.opts.RedeemAudiences != nil && !s.opts.RedeemAudiences[svc.Subject][pc.GetAudience()] {
		return nil, apierror.PermissionDenied("this service identity may not redeem leases of this audience (--redeem-audiences)")
	}
	now := s.opts.Now()
	c := lease.Claims{
		ID: pc.GetLeaseId(), Subject: pc.GetSubject(), Tenant: pc.GetTenantId(), Tool: pc.GetToolId(),
		Server: pc.GetServerId(), AudienceClass: pc.GetAudienceClass(), DescriptorDigest: pc.GetDescriptorDigest(),
		Generation: pc.GetGeneration(), PolicyEpoch: pc.GetPolicyEpoch(), ArgumentDigest: pc.GetArgumentDigest(),
		Audience: pc.GetAudience(), HolderThumbprint: pc.GetHolderThumbprint(), Receipt: pc.GetReceiptId(),
		IssuedAt: pc.GetIssuedAt().AsTime(), ExpiresAt: pc.GetExpiresAt().AsTime(),
	}
	switch {
	case !now.Before(c.ExpiresAt.Add(s.opts.Skew)):
		return redeemRefused(lease.Expired, "the lease expired"), nil
	case c.ExpiresAt.Sub(now) > lease.MaxTTL+s.opts.Skew || c.ExpiresAt.Sub(c.IssuedAt) > lease.MaxTTL:
		// No lease lives longer: these are not a lease's claims (and its
		// single-use record would outlive every lease).
		v.Add("claims.expires_at", "more than %s after issued_at or now", lease.MaxTTL)
		return nil, v.Err()
	}
	if s.opts.Incidents != nil {
		s.opts.Incidents.Observe(ctx, c)
	}
	f, detail, err := s.accept(ctx, c, now)
	if err != nil {
		return nil, err
	}
	if f != lease.Accepted {
		return redeemRefused(f, detail), nil
	}
	return &leasev1.RedeemResponse{Valid: true}, nil
}

func redeemRefused(f lease.Failure, detail string) *leasev1.RedeemResponse {
	return &leasev1.RedeemResponse{Failure: failureProto(f), Detail: detail}
}

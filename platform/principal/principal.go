package principal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	lru "github.com/hashicorp/golang-lru/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/ids"
)

// Principal is a verified caller.
type Principal struct {
	// Subject is the token's `sub`.
	Subject string
	// Tenant is the token's `tenant` claim.
	Tenant string
	// Groups is the token's `groups` claim.
	Groups []string
	// Admin is true for members of the configured admin group of the
	// configured platform tenant, and only for them.
	Admin bool
	// Service is true for members of the configured service group of the
	// configured platform tenant, and only for them.
	Service bool
	// Confirmer is true for members of the configured confirmer group of
	// the configured platform tenant, and only for them: the gateway, or a
	// host runtime acting for a user, that may assert beside the user's
	// token that the user confirmed a call (see [ConfirmerMetadataKey]).
	// Neither the admin nor the service role confirms.
	Confirmer bool
	// ExpiresAt is the token's expiry.
	ExpiresAt time.Time
	// Claims are the token's claims named in VerifierConfig.ConditionClaims
	// whose value is a string of at most [MaxConditionClaimBytes] bytes (a
	// grant's condition reads them as `principal.claims`); nil when none.
	Claims map[string]string
}

// MaxConditionClaimBytes bounds a claim value kept in [Principal].Claims;
// a longer value is left out (absent, never cut).
const MaxConditionClaimBytes = 256

// InGroup reports whether the principal is a member of group.
func (p Principal) InGroup(group string) bool { return slices.Contains(p.Groups, group) }

// Owns reports whether owner (an [Owner] in its written form) names the
// principal: the owner's tenant is the principal's tenant, and its group is
// one of the principal's groups or its subject is the principal's subject.
// A malformed owner names nobody.
func (p Principal) Owns(owner string) bool {
	o, err := ParseOwner(owner)
	if err != nil || p.Tenant == "" || o.Tenant != p.Tenant {
		return false
	}
	if o.Group != "" {
		return p.InGroup(o.Group)
	}
	return o.Subject == p.Subject
}

// SeesTenant reports whether p may read the tenant's records: platform
// admins and services read every tenant, any other principal only the
// tenant of its token. The tenant's data is then shown to p; to anyone else
// it must look exactly as if it did not exist.
func (p Principal) SeesTenant(tenant string) bool {
	return p.Admin || p.Service || (p.Tenant != "" && p.Tenant == tenant)
}

// ReasonInvalidToken is the ErrorInfo reason of a call whose bearer token
// did not verify (UNAUTHENTICATED); a malformed claim adds the metadata
// `claim` naming it.
const ReasonInvalidToken = "INVALID_TOKEN"

// ErrInvalidToken is wrapped by every verification failure.
var ErrInvalidToken = errors.New("invalid token")

// ClaimError is the refusal of a token whose signature and lifetime
// verified but one of whose claims is malformed (a `tenant` claim that is no
// tenant id). It wraps [ErrInvalidToken]; its message names the claim and
// the rule and never contains the claim's value, so it is safe to return
// to the caller as it is.
type ClaimError struct {
	// Claim is the claim's name in the token (e.g. "tenant").
	Claim string
	// Rule is what the claim must be.
	Rule string
}

func (e *ClaimError) Error() string {
	return ErrInvalidToken.Error() + ": the token's `" + e.Claim + "` claim " + e.Rule
}

// Unwrap makes a ClaimError an [ErrInvalidToken].
func (e *ClaimError) Unwrap() error { return ErrInvalidToken }

// VerifierConfig configures a [Verifier].
type VerifierConfig struct {
	// JWKS is the JSON Web Key Set with the identity provider's public keys.
	JWKS []byte
	// Issuer is the required `iss`; empty accepts any.
	Issuer string
	// Audience is the required `aud`.
	Audience string
	// PlatformTenant is the tenant whose members may hold the admin,
	// service and confirmer roles; required when AdminGroup, ServiceGroup
	// or ConfirmerGroup is set. A
	// member of AdminGroup in any other tenant is no admin: group names are
	// chosen by each tenant, so only the platform tenant's count.
	PlatformTenant string
	// AdminGroup makes its members of PlatformTenant admins.
	AdminGroup string
	// ServiceGroup makes its members of PlatformTenant service principals.
	ServiceGroup string
	// ConfirmerGroup makes its members of PlatformTenant confirmers; empty
	// makes nobody a confirmer (then no call is ever user-confirmed).
	ConfirmerGroup string
	// MaxLifetime is the longest lifetime a token may have: exp - iat, or
	// exp - now for a token without iat. 0 means [DefaultMaxTokenLifetime].
	MaxLifetime time.Duration
	// Leeway tolerates clock skew on exp/nbf/iat; 0 means 30s.
	Leeway time.Duration
	// ConditionClaims are the token claims a grant's condition may read
	// (`principal.claims`), as the operator allow-listed them; empty keeps
	// none. Only string values are kept.
	ConditionClaims []string
	// ServiceIdentities are SPIFFE IDs whose verified client certificate
	// identifies a toolcrib service on a call without a bearer token
	// (peer.go).
	ServiceIdentities []string
}

// DefaultMaxTokenLifetime is the longest token lifetime accepted unless
// configured otherwise.
const DefaultMaxTokenLifetime = 24 * time.Hour

// Verifier checks tokens against configured keys.
//
// A token that verified is remembered (up to [verifiedCacheSize] tokens)
// until it expires, so a caller presenting the same token on every call
// pays for one signature check, not one per call. The keys never change
// for the life of a Verifier, so a remembered result stays true; expiry is
// checked again on every use.
type Verifier struct {
	cfg  VerifierConfig
	keys jose.JSONWebKeySet
	now  func() time.Time

	verified *lru.Cache[string, Principal]

	// issuers, when set, replaces keys: the verifier trusts OpenID
	// providers (oidc.go).
	issuers *issuerSet

	identities map[string]bool
}

// verifiedCacheSize bounds the remembered tokens; when full, the least
// recently used one is forgotten.
const verifiedCacheSize = 4096

// maxQuotedKeyID bounds a token's `kid` quoted in a refusal.
const maxQuotedKeyID = 64

var algorithms = []jose.SignatureAlgorithm{jose.EdDSA, jose.ES256, jose.ES384, jose.RS256, jose.PS256}

// NewVerifier parses the key set and returns a verifier.
func NewVerifier(cfg VerifierConfig) (*Verifier, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(cfg.JWKS, &set); err != nil {
		return nil, fmt.Errorf("principal: parse JWKS: %w", err)
	}
	if len(set.Keys) == 0 {
		return nil, errors.New("principal: the JWKS has no keys")
	}
	for _, k := range set.Keys {
		if !k.IsPublic() {
			return nil, fmt.Errorf("principal: JWKS key %q is a private key; give only public keys", k.KeyID)
		}
	}
	if cfg.Leeway == 0 {
		cfg.Leeway = 30 * time.Second
	}
	if cfg.MaxLifetime == 0 {
		cfg.MaxLifetime = DefaultMaxTokenLifetime
	}
	if cfg.MaxLifetime < 0 {
		return nil, errors.New("principal: the maximum token lifetime must be positive")
	}
	if (cfg.AdminGroup != "" || cfg.ServiceGroup != "" || cfg.ConfirmerGroup != "") && !ids.ValidTenantID(cfg.PlatformTenant) {
		return nil, fmt.Errorf("principal: admin, service and confirmer groups need a platform tenant matching %s", ids.TenantIDPattern)
	}
	v := &Verifier{cfg: cfg, keys: set, now: time.Now, verified: newVerifiedCache()}
	if err := v.setIdentities(cfg.ServiceIdentities); err != nil {
		return nil, err
	}
	return v, nil
}

// LoadVerifier reads the JWKS from a file.
func LoadVerifier(path string, cfg VerifierConfig) (*Verifier, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("principal: read JWKS: %w", err)
	}
	cfg.JWKS = b
	return NewVerifier(cfg)
}

// SetClock replaces the verifier's clock (tests).
func (v *Verifier) SetClock(now func() time.Time) { v.now = now }

type extraClaims struct {
	Tenant string   `json:"tenant"`
	Groups []string `json:"groups"`
}

func newVerifiedCache() *lru.Cache[string, Principal] {
	c, err := lru.New[string, Principal](verifiedCacheSize)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return c
}

// Verify checks a compact JWT and returns its principal.
func (v *Verifier) Verify(token string) (Principal, error) {
	if v.issuers != nil {
		return v.verifyOIDC(token)
	}
	p, ok := v.verified.Get(token)
	if ok {
		if v.now().Before(p.ExpiresAt.Add(v.cfg.Leeway)) {
			return p, nil
		}
		v.verified.Remove(token)
	}
	p, err := v.verify(token)
	if err != nil {
		return Principal{}, err
	}
	v.verified.Add(token, p)
	return p, nil
}

func (v *Verifier) verify(token string) (Principal, error) {
	tok, err := jwt.ParseSigned(token, algorithms)
	if err != nil {
		return Principal{}, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	if len(tok.Headers) != 1 {
		return Principal{}, fmt.Errorf("%w: expected one signature", ErrInvalidToken)
	}
	keys, iss, err := v.signingKeys(tok)
	if err != nil {
		return Principal{}, err
	}
	var std jwt.Claims
	var extra extraClaims
	var lastErr error
	verified := false
	for _, k := range keys {
		if err := tok.Claims(k.Key, &std, &extra); err != nil {
			lastErr = err
			continue
		}
		verified = true
		break
	}
	if !verified {
		return Principal{}, fmt.Errorf("%w: signature: %v", ErrInvalidToken, lastErr)
	}
	if std.Expiry == nil {
		return Principal{}, fmt.Errorf("%w: no expiry", ErrInvalidToken)
	}
	if std.Subject == "" {
		return Principal{}, fmt.Errorf("%w: no subject", ErrInvalidToken)
	}
	exp := jwt.Expected{Time: v.now()}
	if v.cfg.Issuer != "" {
		exp.Issuer = v.cfg.Issuer
	}
	if v.cfg.Audience != "" {
		exp.AnyAudience = jwt.Audience{v.cfg.Audience}
	}
	if err := v.applyIssuer(iss, tok, &exp, &extra); err != nil {
		return Principal{}, err
	}
	if err := std.ValidateWithLeeway(exp, v.cfg.Leeway); err != nil {
		return Principal{}, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	from := exp.Time
	if std.IssuedAt != nil {
		from = std.IssuedAt.Time()
	}
	if life := std.Expiry.Time().Sub(from); life > v.cfg.MaxLifetime {
		return Principal{}, fmt.Errorf("%w: lifetime %v exceeds the maximum %v", ErrInvalidToken, life.Round(time.Second), v.cfg.MaxLifetime)
	}
	// A tenant claim that is there is a tenant id, or the token is refused
	// here, once, for every service and the gateway: passed on, it reached
	// the registry as a malformed request and looked like an outage. A token
	// without one is a principal of no tenant (it sees no tenant's data and
	// holds no role).
	if extra.Tenant != "" && !ids.ValidTenantID(extra.Tenant) {
		return Principal{}, &ClaimError{Claim: "tenant", Rule: "is not a tenant id (must match " + ids.TenantIDPattern + ")"}
	}
	p := Principal{Subject: std.Subject, Tenant: extra.Tenant, Groups: extra.Groups, ExpiresAt: std.Expiry.Time()}
	platform := v.cfg.PlatformTenant != "" && p.Tenant == v.cfg.PlatformTenant
	p.Admin = platform && v.cfg.AdminGroup != "" && p.InGroup(v.cfg.AdminGroup)
	p.Service = platform && v.cfg.ServiceGroup != "" && p.InGroup(v.cfg.ServiceGroup)
	p.Confirmer = platform && v.cfg.ConfirmerGroup != "" && p.InGroup(v.cfg.ConfirmerGroup)
	if len(v.cfg.ConditionClaims) > 0 {
		// The signature verified above: reading the payload again is safe.
		var raw map[string]any
		if err := tok.UnsafeClaimsWithoutVerification(&raw); err == nil {
			p.Claims = conditionClaims(raw, v.cfg.ConditionClaims)
		}
	}
	return p, nil
}

// conditionClaims keeps the allow-listed string claims of raw.
func conditionClaims(raw map[string]any, allow []string) map[string]string {
	var out map[string]string
	for _, name := range allow {
		s, ok := raw[name].(string)
		if !ok || len(s) > MaxConditionClaimBytes {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(allow))
		}
		out[name] = s
	}
	return out
}

type ctxKey struct{}

// NewContext returns ctx carrying p.
func NewContext(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// FromContext returns the verified principal of the request, if any.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(ctxKey{}).(Principal)
	return p, ok
}

// Require returns the request's principal or an Unauthenticated error.
func Require(ctx context.Context) (Principal, error) {
	p, ok := FromContext(ctx)
	if !ok {
		return Principal{}, apierror.Unauthenticated("a bearer token is required")
	}
	return p, nil
}

// RequireAdmin returns the principal if it is a platform admin.
func RequireAdmin(ctx context.Context) (Principal, error) {
	p, err := Require(ctx)
	if err != nil {
		return p, err
	}
	if !p.Admin {
		return p, apierror.PermissionDenied("this operation needs a platform admin")
	}
	return p, nil
}

// RequireAdminOrService returns the principal if it is a platform admin or
// a toolcrib service.
func RequireAdminOrService(ctx context.Context) (Principal, error) {
	p, err := Require(ctx)
	if err != nil {
		return p, err
	}
	if !p.Admin && !p.Service {
		return p, apierror.PermissionDenied("this operation needs a platform admin or a toolcrib service")
	}
	return p, nil
}

// RequireService returns the principal if it is a toolcrib service (a
// token of the service group, or a client certificate with a configured
// SPIFFE service identity).
func RequireService(ctx context.Context) (Principal, error) {
	p, err := Require(ctx)
	if err != nil {
		return p, err
	}
	if !p.Service {
		return p, apierror.PermissionDenied("this operation needs a toolcrib service identity")
	}
	return p, nil
}

// public reports whether a method needs no credential: health checks,
// server reflection, and the public signing keys (JWKS) of leases and of
// admission's signed receipts.
func public(fullMethod string) bool {
	return strings.HasPrefix(fullMethod, "/grpc.health.v1.Health/") ||
		strings.HasPrefix(fullMethod, "/grpc.reflection.") ||
		fullMethod == "/toolcrib.lease.v1.LeaseService/GetSigningKeys" ||
		fullMethod == "/toolcrib.admission.v1.AdmissionService/GetSigningKeys"
}

func (v *Verifier) authenticate(ctx context.Context, fullMethod string) (context.Context, error) {
	if public(fullMethod) {
		return ctx, nil
	}
	// ValueFromIncomingContext copies only this key's values, not the whole
	// metadata (which FromIncomingContext copies on every call).
	vals := metadata.ValueFromIncomingContext(ctx, "authorization")
	if len(vals) == 0 {
		if p, ok := v.peerService(ctx); ok {
			return NewContext(ctx, p), nil
		}
		return ctx, apierror.Unauthenticated("missing authorization metadata: send `authorization: Bearer <token>`")
	}
	if len(vals) > 1 {
		return ctx, apierror.Unauthenticated("more than one authorization value")
	}
	raw, ok := strings.CutPrefix(vals[0], "Bearer ")
	if !ok {
		return ctx, apierror.Unauthenticated("authorization must be `Bearer <token>`")
	}
	p, err := v.Verify(strings.TrimSpace(raw))
	if err != nil {
		// The reason is safe to return: it names the failed check, never the
		// token.
		e := &apierror.Error{Code: codes.Unauthenticated, Reason: ReasonInvalidToken, Message: err.Error()}
		var claim *ClaimError
		if errors.As(err, &claim) {
			e.Metadata = map[string]string{"claim": claim.Claim}
		}
		return ctx, e
	}
	return NewContext(ctx, p), nil
}

// UnaryServerInterceptor verifies the bearer token of every call except
// health and reflection, and puts the principal in the context. A call with
// no valid token fails UNAUTHENTICATED before reaching the handler.
func (v *Verifier) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, err := v.authenticate(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// StreamServerInterceptor is the streaming form of UnaryServerInterceptor.
func (v *Verifier) StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, err := v.authenticate(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}
		return handler(srv, &wrappedStream{ServerStream: ss, ctx: ctx})
	}
}

type wrappedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (w *wrappedStream) Context() context.Context { return w.ctx }

package grpcapi

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
	"unicode"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/canonical"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/signedreceipt"
	"github.com/toolcrib/toolcrib/revision/lease"
	"github.com/toolcrib/toolcrib/services/lease/admissionview"
	"github.com/toolcrib/toolcrib/services/lease/internal/issuance"
	"github.com/toolcrib/toolcrib/services/lease/internal/keys"
	"github.com/toolcrib/toolcrib/services/lease/internal/ledger"
	"github.com/toolcrib/toolcrib/services/lease/internal/metrics"
	"github.com/toolcrib/toolcrib/services/lease/internal/store"

	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
)

// ErrorInfo reasons of this service beyond issuance's.
const (
	ReasonIssuanceFrozen       = "ISSUANCE_FROZEN"
	ReasonAdmissionUnavailable = "ADMISSION_UNAVAILABLE"
	ReasonReceiptNotFound      = "RECEIPT_NOT_FOUND"
	ReasonLedgerUnavailable    = "LEDGER_UNAVAILABLE"
	ReasonStalePolicy          = "STALE_POLICY"
	// ReasonPolicyChanged: Issue of a decision made at a policy epoch the
	// tenant has since moved past (a lease of it would be refused
	// POLICY_CHANGED at Verify): Check again.
	ReasonPolicyChanged = "POLICY_CHANGED"
	// ReasonStaleCatalog: Issue of a decision whose generation is no longer
	// active or compatible (rolled back, replaced, closed): Check again.
	ReasonStaleCatalog = "STALE_CATALOG"
	// ReasonReceiptAlreadyUsed: Issue of a receipt a lease was already
	// issued on (one decision, one execution): Check again.
	ReasonReceiptAlreadyUsed = "RECEIPT_ALREADY_USED"
	// ReasonReceiptInvalid: Issue of a signed receipt that does not verify
	// against admission's published keys (another key, altered, malformed).
	ReasonReceiptInvalid = "RECEIPT_INVALID"
)

// maxIDLen bounds every id and audience in a request.
const maxIDLen = 256

// maxReasonLen bounds a revocation or freeze reason.
const maxReasonLen = 1024

// Options configure a [Server].
type Options struct {
	// Store records receipts, revocations and freezes.
	Store *store.Store
	// Ring signs leases and publishes their keys.
	Ring *keys.Ring
	// Standing answers revocation and freeze at Verify from memory (see
	// package standing) and is synced after this replica's own Revoke and
	// FreezeIssuance; nil reads Store for every Verify.
	Standing Standing
	// Ledger consumes lease ids (single use).
	Ledger ledger.Ledger
	// Receipts looks up admission receipts; nil refuses Issue by receipt_id
	// (FAILED_PRECONDITION ADMISSION_UNAVAILABLE).
	Receipts admissionview.ReceiptSource
	// SignedReceipts verifies Issue's `signed_receipt` locally; nil refuses
	// it (FAILED_PRECONDITION ADMISSION_UNAVAILABLE).
	SignedReceipts admissionview.ReceiptVerifier
	// Checker runs an inline Check; nil refuses Issue with `check`.
	Checker admissionview.Checker
	// Freshness checks epoch and generation at Verify; nil skips that check
	// (the service logs a warning at start).
	Freshness admissionview.Freshness
	// Issuer is the `iss` of leases.
	Issuer string
	// Skew is the clock-skew allowance of Verify; 0 means lease.DefaultSkew.
	Skew time.Duration
	// ProofWindow is how old a holder proof may be; 0 means
	// lease.DefaultProofWindow.
	ProofWindow time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives the audit lines of Revoke and FreezeIssuance.
	Logger *slog.Logger
	// Metrics counts issued leases and Verify answers; nil counts nothing.
	Metrics *metrics.Metrics
	// RedeemAudiences, when set, binds Redeem: a service identity (the
	// principal's subject) may redeem only leases whose audience is in its
	// set; nil lets any toolcrib service redeem any lease.
	RedeemAudiences map[string]map[string]bool
	// Incidents sees every lease whose token verified at Verify, before
	// revocation, freeze, freshness and single use are checked (package
	// incident); nil looks for none.
	Incidents Incidents
}

// Incidents looks for unauthorized events among presented leases.
type Incidents interface {
	// Observe must not block.
	Observe(ctx context.Context, c lease.Claims)
}

// Standing is the replica's view of revocations and freezes.
type Standing interface {
	// Status is [store.Store.Status], from a view that holds every change
	// committed up to a bounded time ago.
	Status(ctx context.Context, c lease.Claims) (store.Status, error)
	// Sync makes the view hold every change committed before the call.
	Sync(ctx context.Context) error
	// SawFrozen tells the view that an issue's own transaction found the
	// server frozen, so the replica never answers otherwise before a load
	// newer than that.
	SawFrozen(server string)
}

// Server implements [leasev1.LeaseServiceServer].
type Server struct {
	leasev1.UnimplementedLeaseServiceServer
	opts Options

	holders holderCache
	headers lease.HeaderCache
}

// maxHolders bounds the parsed holder keys kept; the cache starts over
// when it is full.
const maxHolders = 4096

// holderCache keeps parsed holder keys by their JWK bytes: a holder (a
// gateway, an agent) asks for many leases with one key, and parsing is a
// pure function of the bytes. Only keys that parsed are kept.
type holderCache struct {
	mu sync.Mutex
	m  map[string]lease.HolderKey
}

func (c *holderCache) parse(jwk []byte) (lease.HolderKey, error) {
	c.mu.Lock()
	k, ok := c.m[string(jwk)]
	c.mu.Unlock()
	if ok {
		return k, nil
	}
	k, err := lease.ParseHolderKey(jwk)
	if err != nil {
		return k, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxHolders {
		c.m = make(map[string]lease.HolderKey, 64)
	}
	c.m[string(jwk)] = k
	c.mu.Unlock()
	return k, nil
}

// New returns the service.
func New(opts Options) *Server {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Skew <= 0 {
		opts.Skew = lease.DefaultSkew
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Server{opts: opts}
}

// translate turns typed errors into API errors; it is the one place that
// does. Anything else passes through (an [apierror.Error] keeps its
// meaning, the rest becomes INTERNAL at the interceptor, logged).
func translate(err error) error {
	var (
		refusal *issuance.Refusal
		frozen  *store.FrozenError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &refusal):
		if refusal.Permission() {
			return &apierror.Error{Code: codes.PermissionDenied, Reason: refusal.Reason, Message: refusal.Message}
		}
		return apierror.FailedPrecondition(refusal.Reason, refusal.Message)
	case errors.As(err, &frozen):
		e := apierror.FailedPrecondition(ReasonIssuanceFrozen, "issuance of leases for this server is frozen")
		e.Metadata = map[string]string{"server_id": frozen.Server}
		return e
	case errors.Is(err, store.ErrReceiptUsed):
		return apierror.FailedPrecondition(ReasonReceiptAlreadyUsed,
			"a lease was already issued on this receipt; Check again for a new decision")
	case errors.Is(err, admissionview.ErrInvalidReceipt):
		return &apierror.Error{Code: codes.PermissionDenied, Reason: ReasonReceiptInvalid,
			Message: "the signed receipt does not verify against admission's published keys"}
	case errors.Is(err, admissionview.ErrNotFound):
		return &apierror.Error{Code: codes.NotFound, Reason: ReasonReceiptNotFound, Message: "admission has no such receipt"}
	case errors.Is(err, admissionview.ErrStale):
		return &apierror.Error{Code: codes.Unavailable, Reason: ReasonStalePolicy,
			Message: "the lease service cannot prove its policy and catalog view is fresh; retry", Err: err}
	case errors.Is(err, admissionview.ErrUnavailable):
		return &apierror.Error{Code: codes.Unavailable, Reason: ReasonAdmissionUnavailable, Message: "admission cannot be asked now; retry", Err: err}
	case errors.Is(err, ledger.ErrUnavailable):
		return &apierror.Error{Code: codes.Unavailable, Reason: ReasonLedgerUnavailable,
			Message: "single use cannot be confirmed now; the lease is not accepted", Err: err}
	}
	return err
}

// checkID validates a required, bounded, printable id.
func checkID(v *apierror.Violations, field, s string) {
	switch {
	case s == "":
		v.Add(field, "required")
	case len(s) > maxIDLen:
		v.Add(field, "longer than %d bytes", maxIDLen)
	case !printable(s):
		v.Add(field, "must be printable text without spaces or control characters")
	}
}

func printable(s string) bool {
	for _, r := range s {
		if r == unicode.ReplacementChar || !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

func checkReason(v *apierror.Violations, s string) {
	if len(s) > maxReasonLen {
		v.Add("reason", "longer than %d bytes", maxReasonLen)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			v.Add("reason", "must not contain control characters")
			return
		}
	}
}

// Issue implements LeaseService.Issue.
func (s *Server) Issue(ctx context.Context, req *leasev1.IssueRequest) (*leasev1.IssueResponse, error) {
	p, err := principal.Require(ctx)
	if err != nil {
		return nil, err
	}
	var v apierror.Violations
	sources := 0
	for _, set := range []bool{req.GetReceiptId() != "", req.GetSignedReceipt() != "", req.GetCheck() != nil} {
		if set {
			sources++
		}
	}
	switch {
	case sources == 0:
		v.Add("receipt_id", "set signed_receipt, receipt_id or check")
	case sources > 1 && req.GetCheck() != nil:
		v.Add("check", "set only one of signed_receipt, receipt_id and check")
	case sources > 1:
		v.Add("signed_receipt", "set only one of signed_receipt, receipt_id and check")
	case req.GetReceiptId() != "":
		checkID(&v, "receipt_id", req.GetReceiptId())
	case len(req.GetSignedReceipt()) > signedreceipt.MaxTokenBytes:
		v.Add("signed_receipt", "longer than %d bytes", signedreceipt.MaxTokenBytes)
	}
	if !canonical.ValidDigest(req.GetArgumentDigest()) {
		v.Add("argument_digest", "must be sha256:<64 lowercase hex>")
	}
	holder, herr := s.holders.parse(req.GetHolderPublicKey())
	if herr != nil {
		v.Add("holder_public_key", "must be an Ed25519 public JWK (kty OKP, crv Ed25519, x; no private part)")
	}
	checkID(&v, "audience", req.GetAudience())
	if req.GetTtlSeconds() < 0 {
		v.Add("ttl_seconds", "must not be negative")
	}
	if err := v.Err(); err != nil {
		return nil, err
	}

	d, err := s.decide(ctx, req)
	if err != nil {
		return nil, translate(err)
	}
	now := s.opts.Now()
	w, refusal := issuance.Decide(now, issuance.Principal{Subject: p.Subject, Tenant: p.Tenant}, d,
		req.GetArgumentDigest(), time.Duration(req.GetTtlSeconds())*time.Second)
	if refusal != nil {
		return nil, translate(refusal)
	}
	r := d.Receipt
	claims := lease.Claims{
		ID: uuid.Must(uuid.NewV7()).String(), Issuer: s.opts.Issuer, Subject: p.Subject, Tenant: p.Tenant,
		Tool: r.GetToolId(), Server: r.GetServerId(), AudienceClass: r.GetAudienceClass(),
		DescriptorDigest: r.GetDescriptorDigest(), Generation: r.GetGeneration(), PolicyEpoch: r.GetPolicyEpoch(),
		ArgumentDigest: r.GetArgumentDigest(), Audience: req.GetAudience(), HolderThumbprint: holder.Thumbprint,
		Receipt: r.GetReceiptId(), IssuedAt: w.IssuedAt, ExpiresAt: w.ExpiresAt,
	}
	// A frozen server is said first (the recorded issue checks it again, in
	// its transaction): it is what an operator must act on.
	if st, err := s.status(ctx, claims); err != nil {
		return nil, translate(err)
	} else if st.Frozen {
		return nil, translate(&store.FrozenError{Server: claims.Server})
	}
	// The call-time re-check (seed 000): a decision the tenant's policy or
	// the catalog has moved past since it was made gets no lease, exactly
	// as Verify would refuse one; a view that cannot prove itself fresh
	// refuses too (STALE_POLICY).
	switch verdict, err := s.currency(ctx, claims); {
	case err != nil:
		return nil, translate(err)
	case verdict == admissionview.PolicyChanged:
		return nil, apierror.FailedPrecondition(ReasonPolicyChanged,
			"the tenant's policy changed since the decision was made; Check again")
	case verdict == admissionview.StaleCatalog:
		return nil, apierror.FailedPrecondition(ReasonStaleCatalog,
			"the decision's generation is no longer active or compatible; Check again")
	}
	// The receipt is claimed last, by the execution receipt's own commit,
	// after every other check passed, so a refused Issue (another
	// principal's receipt, other arguments, a frozen server, a moved
	// policy) never burns it: only its own principal, for the arguments it
	// was decided for, can use it up, and the claim is exactly as durable
	// as the lease's record (one unique row per admission receipt across
	// every replica; no second round trip).
	token, kid, err := s.opts.Ring.Sign(claims)
	if err != nil {
		return nil, err
	}
	receiptID, err := s.opts.Store.RecordIssue(ctx, store.Issued{Claims: claims, KeyID: kid})
	if err != nil {
		var frozen *store.FrozenError
		if errors.As(err, &frozen) && s.opts.Standing != nil {
			s.opts.Standing.SawFrozen(frozen.Server)
		}
		return nil, translate(err)
	}
	if s.opts.Metrics != nil {
		s.opts.Metrics.Issued()
	}
	return &leasev1.IssueResponse{Token: token, Claims: claimsProto(claims), ExecutionReceiptId: receiptID}, nil
}

func (s *Server) decide(ctx context.Context, req *leasev1.IssueRequest) (admissionview.Decision, error) {
	if req.GetCheck() != nil {
		if s.opts.Checker == nil {
			return admissionview.Decision{}, apierror.FailedPrecondition(ReasonAdmissionUnavailable, "this lease service has no admission to run a Check; cite a receipt_id")
		}
		return s.opts.Checker.Check(ctx, req.GetCheck())
	}
	if req.GetSignedReceipt() != "" {
		if s.opts.SignedReceipts == nil {
			return admissionview.Decision{}, apierror.FailedPrecondition(ReasonAdmissionUnavailable, "this lease service has no admission keys to verify a signed receipt; send a check")
		}
		return s.opts.SignedReceipts.Verify(ctx, req.GetSignedReceipt())
	}
	if s.opts.Receipts == nil {
		return admissionview.Decision{}, apierror.FailedPrecondition(ReasonAdmissionUnavailable, "this lease service has no receipt lookup; send a check")
	}
	return s.opts.Receipts.Receipt(ctx, req.GetReceiptId())
}

// Verify implements LeaseService.Verify.
func (s *Server) Verify(ctx context.Context, req *leasev1.VerifyRequest) (*leasev1.VerifyResponse, error) {
	resp, err := s.verify(ctx, req)
	if err == nil && s.opts.Metrics != nil {
		s.opts.Metrics.Verified(lease.Failure(resp.GetFailure()))
	}
	return resp, err
}

func (s *Server) verify(ctx context.Context, req *leasev1.VerifyRequest) (*leasev1.VerifyResponse, error) {
	if _, err := principal.Require(ctx); err != nil {
		return nil, err
	}
	var v apierror.Violations
	checkID(&v, "audience", req.GetAudience())
	checkID(&v, "tool_id", req.GetToolId())
	if !canonical.ValidDigest(req.GetArgumentDigest()) {
		v.Add("argument_digest", "must be sha256:<64 lowercase hex>")
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	now := s.opts.Now()
	c, refusal := lease.Check(lease.Input{
		Token: req.GetToken(), Proof: req.GetProof(), Audience: req.GetAudience(), Tool: req.GetToolId(),
		ArgumentDigest: req.GetArgumentDigest(), Keys: s.opts.Ring.KeySet(), Now: now,
		Skew: s.opts.Skew, ProofWindow: s.opts.ProofWindow, Headers: &s.headers,
	})
	if refusal != nil {
		return refused(c, refusal.Failure, refusal.Detail), nil
	}
	if s.opts.Incidents != nil {
		s.opts.Incidents.Observe(ctx, *c)
	}
	f, detail, err := s.accept(ctx, *c, now)
	switch {
	case err != nil:
		return nil, err
	case f != lease.Accepted:
		return refused(c, f, detail), nil
	}
	return &leasev1.VerifyResponse{Valid: true, Claims: claimsProto(*c)}, nil
}

// accept is what the service checks of a lease whose token and proof were
// verified (here by Verify, or offline by the executor before Redeem):
// revocation and freeze, then that its policy epoch and generation are
// still current or compatible, then single use, consumed last so that a
// refused presentation does not burn the lease. lease.Accepted when the
// lease may run; an error when a check cannot be answered (fail closed).
func (s *Server) accept(ctx context.Context, c lease.Claims, now time.Time) (lease.Failure, string, error) {
	st, err := s.status(ctx, c)
	if err != nil {
		return 0, "", err
	}
	switch {
	case st.Revoked:
		return lease.Revoked, "the lease, its tool, server or tenant was revoked", nil
	case st.Frozen:
		return lease.Frozen, "issuance for the lease's server is frozen", nil
	}
	switch verdict, err := s.currency(ctx, c); {
	case err != nil:
		return 0, "", translate(err)
	case verdict == admissionview.PolicyChanged:
		return lease.PolicyChanged, "the tenant's policy changed since the lease was issued", nil
	case verdict == admissionview.StaleCatalog:
		return lease.StaleCatalog, "the lease's generation is no longer active or compatible", nil
	}
	ttl := c.ExpiresAt.Add(s.opts.Skew).Sub(now)
	switch err := s.opts.Ledger.Consume(ctx, ledger.UseID(c.ID, c.Audience), ttl); {
	case errors.Is(err, ledger.ErrAlreadyUsed):
		return lease.AlreadyUsed, "the lease was already used", nil
	case err != nil:
		return 0, "", translate(err)
	}
	return lease.Accepted, "", nil
}

// status is whether c is revoked and its server frozen, from the standing
// view when there is one (Postgres otherwise).
func (s *Server) status(ctx context.Context, c lease.Claims) (store.Status, error) {
	if s.opts.Standing != nil {
		return s.opts.Standing.Status(ctx, c)
	}
	return s.opts.Store.Status(ctx, c)
}

// currency is whether c's policy epoch and generation are still current or
// compatible (Issue and Verify ask the same); Current without a freshness
// source.
func (s *Server) currency(ctx context.Context, c lease.Claims) (admissionview.Verdict, error) {
	if s.opts.Freshness == nil {
		return admissionview.Current, nil
	}
	return s.opts.Freshness.Check(ctx, admissionview.Binding{
		Tenant: c.Tenant, Server: c.Server, AudienceClass: c.AudienceClass, Tool: c.Tool,
		DescriptorDigest: c.DescriptorDigest, Generation: c.Generation, PolicyEpoch: c.PolicyEpoch,
	})
}

func refused(c *lease.Claims, f lease.Failure, detail string) *leasev1.VerifyResponse {
	resp := &leasev1.VerifyResponse{Failure: failureProto(f), Detail: detail}
	if c != nil {
		resp.Claims = claimsProto(*c)
	}
	return resp
}

// failureProto is the one conversion of a [lease.Failure]: the numbers are
// the proto's (TestFailuresMatchTheProto keeps them in step).
func failureProto(f lease.Failure) leasev1.VerifyFailure { return leasev1.VerifyFailure(f) }

func claimsProto(c lease.Claims) *leasev1.LeaseClaims {
	return &leasev1.LeaseClaims{
		LeaseId: c.ID, Subject: c.Subject, TenantId: c.Tenant, ToolId: c.Tool, ServerId: c.Server,
		DescriptorDigest: c.DescriptorDigest, Generation: c.Generation, PolicyEpoch: c.PolicyEpoch,
		ArgumentDigest: c.ArgumentDigest, Audience: c.Audience, HolderThumbprint: c.HolderThumbprint,
		IssuedAt: timestamppb.New(c.IssuedAt), ExpiresAt: timestamppb.New(c.ExpiresAt), ReceiptId: c.Receipt,
		AudienceClass: c.AudienceClass,
	}
}

// sync brings this replica's standing view up to a change it just
// committed; a failed sync leaves the view stale (Verify then reads
// Postgres), so it is logged, not returned.
func (s *Server) sync(ctx context.Context) {
	if s.opts.Standing == nil {
		return
	}
	if err := s.opts.Standing.Sync(context.WithoutCancel(ctx)); err != nil {
		s.opts.Logger.WarnContext(ctx, "standing view not synced after a change; Verify reads Postgres until it reloads", "error", err)
	}
}

// Revoke implements LeaseService.Revoke.
func (s *Server) Revoke(ctx context.Context, req *leasev1.RevokeRequest) (*leasev1.RevokeResponse, error) {
	p, err := principal.RequireAdminOrService(ctx)
	if err != nil {
		return nil, err
	}
	var v apierror.Violations
	var kind, target string
	switch t := req.GetTarget().(type) {
	case *leasev1.RevokeRequest_LeaseId:
		kind, target = store.KindLease, t.LeaseId
		checkID(&v, "lease_id", target)
	case *leasev1.RevokeRequest_ToolId:
		kind, target = store.KindTool, t.ToolId
		checkID(&v, "tool_id", target)
	case *leasev1.RevokeRequest_ServerId:
		kind, target = store.KindServer, t.ServerId
		checkID(&v, "server_id", target)
	case *leasev1.RevokeRequest_TenantId:
		kind, target = store.KindTenant, t.TenantId
		checkID(&v, "tenant_id", target)
	default:
		v.Add("target", "set one of lease_id, tool_id, server_id, tenant_id")
	}
	checkReason(&v, req.GetReason())
	if err := v.Err(); err != nil {
		return nil, err
	}
	at, err := s.opts.Store.Revoke(ctx, kind, target, req.GetReason(), p.Subject)
	if err != nil {
		return nil, err
	}
	s.sync(ctx)
	s.opts.Logger.InfoContext(ctx, "audit: leases revoked", "kind", kind, "target", target, "by", p.Subject,
		"reason", req.GetReason(), "effective_at", at)
	return &leasev1.RevokeResponse{EffectiveAt: timestamppb.New(at)}, nil
}

// FreezeIssuance implements LeaseService.FreezeIssuance.
func (s *Server) FreezeIssuance(ctx context.Context, req *leasev1.FreezeIssuanceRequest) (*leasev1.FreezeIssuanceResponse, error) {
	p, err := principal.RequireAdminOrService(ctx)
	if err != nil {
		return nil, err
	}
	var v apierror.Violations
	checkID(&v, "server_id", req.GetServerId())
	checkReason(&v, req.GetReason())
	if err := v.Err(); err != nil {
		return nil, err
	}
	frozen, at, err := s.opts.Store.Freeze(ctx, req.GetServerId(), req.GetFrozen(), req.GetReason(), p.Subject)
	if err != nil {
		return nil, err
	}
	s.sync(ctx)
	s.opts.Logger.InfoContext(ctx, "audit: lease issuance frozen or resumed", "server_id", req.GetServerId(),
		"frozen", frozen, "by", p.Subject, "reason", req.GetReason(), "changed_at", at)
	return &leasev1.FreezeIssuanceResponse{Frozen: frozen, ChangedAt: timestamppb.New(at)}, nil
}

// GetSigningKeys implements LeaseService.GetSigningKeys.
func (s *Server) GetSigningKeys(context.Context, *leasev1.GetSigningKeysRequest) (*leasev1.GetSigningKeysResponse, error) {
	doc, cur, err := s.opts.Ring.JWKS()
	if err != nil {
		return nil, err
	}
	return &leasev1.GetSigningKeysResponse{Jwks: doc, CurrentKeyId: cur}, nil
}

// RotateSigningKey implements LeaseService.RotateSigningKey.
func (s *Server) RotateSigningKey(ctx context.Context, req *leasev1.RotateSigningKeyRequest) (*leasev1.RotateSigningKeyResponse, error) {
	p, err := principal.RequireAdmin(ctx)
	if err != nil {
		return nil, err
	}
	var v apierror.Violations
	checkReason(&v, req.GetReason())
	if err := v.Err(); err != nil {
		return nil, err
	}
	rot, err := s.opts.Ring.Rotate(ctx)
	if err != nil {
		return nil, err
	}
	s.opts.Logger.InfoContext(ctx, "audit: lease signing key rotated", "current_key_id", rot.Current.ID,
		"retired_key_ids", rot.Retired, "by", p.Subject, "reason", req.GetReason(), "rotated_at", rot.At,
		"retired_published_until", rot.PublishedUntil)
	return &leasev1.RotateSigningKeyResponse{CurrentKeyId: rot.Current.ID, RetiredKeyIds: rot.Retired,
		RotatedAt: timestamppb.New(rot.At), RetiredPublishedUntil: timestamppb.New(rot.PublishedUntil)}, nil
}

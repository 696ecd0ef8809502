package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/canonical"
	"github.com/toolcrib/toolcrib/platform/condition"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/services/admission/internal/args"
	"github.com/toolcrib/toolcrib/services/admission/internal/cache"
	"github.com/toolcrib/toolcrib/services/admission/internal/decision"
	"github.com/toolcrib/toolcrib/services/admission/internal/receipts"
	"github.com/toolcrib/toolcrib/services/admission/internal/replica"
	"github.com/toolcrib/toolcrib/services/admission/internal/search"
)

// PointerSource reads one pointer head from discovery on a miss of the
// heads (before the Watch delivered it).
type PointerSource interface {
	// Pointer returns the head of (server, class); replica.ErrNotFound when
	// no generation was ever proven for it.
	Pointer(ctx context.Context, server, class string) (replica.Pointer, error)
}

// Binder binds a run to a generation (I11), off the hot path.
type Binder interface {
	// Bind asks discovery to keep generation of (server, class) while run
	// is live. It must not block: a binder queues and drops when full.
	Bind(run, server, class string, generation int64)
}

// Confirmers finds the confirmer asserting a confirmation beside the
// request's own token ([principal.Verifier] implements it).
type Confirmers interface {
	// Confirmer returns the verified confirmer of the incoming request (a
	// token of the confirmer role under principal.ConfirmerMetadataKey),
	// or an error saying in fixed text why there is none.
	Confirmer(ctx context.Context) (principal.Principal, error)
}

// Options configures a [Server].
type Options struct {
	Heads     *replica.Heads
	Material  *replica.Material
	Pointers  PointerSource
	Cache     *cache.Cache
	Validator *args.Validator
	Limits    args.Limits
	Receipts  *receipts.Writer
	Binder    Binder // nil: runs are not bound
	// Confirmers verifies the confirmer of a MODE_USER_CONFIRMED Check; nil
	// knows none, so every such Check is denied FORBIDDEN.
	Confirmers Confirmers
	// CacheTTL bounds a cached decision's lifetime.
	CacheTTL time.Duration
	// Signing signs every ALLOW receipt (CheckResponse.signed_receipt) and
	// publishes its keys (GetSigningKeys); nil signs none.
	Signing *Signing
	// Replica names this replica in receipts (`host:pid`).
	Replica string
	Now     func() time.Time
	// ConditionNow is the time grants' conditions read as `request.time`;
	// nil reads Now's decision time.
	ConditionNow func() time.Time
	Logger       *slog.Logger
	// Decided is called once per answered Check with its reason and the
	// cache level (metrics); nil for none.
	Decided func(decision.Reason, cache.Level)
	// AuditRate is the share (0..1) of ALLOWs answered from the decision
	// cache that are re-decided from direct reads (see maybeAudit); a
	// denial is reported to Incidents. 0 or a nil Incidents audits none.
	AuditRate float64
	Incidents IncidentReporter
	// Audited is called once per re-check made, with whether it denied
	// (metrics); nil for none.
	Audited func(denied bool)
}

// Server is the AdmissionService.
type Server struct {
	admissionv1.UnimplementedAdmissionServiceServer
	o     Options
	sets  *lru.Cache[string, *search.Set]
	views *lru.Cache[viewKey, *view]
	ids   idPool
	// audits holds a token per re-check running (at most maxAudits).
	audits chan struct{}
}

// viewKey names what one principal holds at one epoch of its tenant.
type viewKey struct {
	tenant  string
	epoch   int64
	subject string
	groups  string // the groups joined by NUL
}

// view is a principal's access at one epoch: immutable, like the policy it
// is computed from (a new epoch is a new key).
type view struct {
	policy replica.Policy
	access decision.Access
	// digest is cache.ScopeSetDigest(access, nil).
	digest string
	// conditional is true when a grant naming the principal carries a
	// condition: only then are conditions evaluated on a Check.
	conditional bool
}

// New returns the service.
func New(o Options) *Server {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.CacheTTL <= 0 {
		o.CacheTTL = time.Minute
	}
	sets, _ := lru.New[string, *search.Set](1024)
	views, _ := lru.New[viewKey, *view](16_384)
	return &Server{o: o, sets: sets, views: views, audits: make(chan struct{}, maxAudits)}
}

// errUnavailable wraps a failure to read what a decision needs.
type unavailableError struct{ err error }

func (e *unavailableError) Error() string { return "admission: " + e.err.Error() }
func (e *unavailableError) Unwrap() error { return e.err }

func unavailable(err error) error { return &unavailableError{err} }

// translate is the one mapping of internal errors to gRPC statuses.
func translate(err error) error {
	if err == nil {
		return nil // before un, which errors.As moves to the heap
	}
	var un *unavailableError
	switch {
	case errors.Is(err, context.Canceled):
		return &apierror.Error{Code: codes.Canceled, Reason: "CANCELED", Message: "the call was canceled"}
	case errors.Is(err, context.DeadlineExceeded):
		return &apierror.Error{Code: codes.DeadlineExceeded, Reason: "DEADLINE_EXCEEDED", Message: "the decision could not be made in time"}
	case errors.Is(err, receipts.ErrBackpressure), errors.Is(err, receipts.ErrClosed):
		return apierror.Unavailable("the receipt could not be kept; retry shortly", err)
	case errors.Is(err, receipts.ErrNotFound):
		return &apierror.Error{Code: codes.NotFound, Reason: ReasonReceiptNotFound, Message: "no such receipt"}
	case errors.As(err, &un):
		return apierror.Unavailable("a source the decision needs cannot be read; retry shortly", err)
	}
	return err
}

// Check implements AdmissionService.Check.
func (s *Server) Check(ctx context.Context, req *admissionv1.CheckRequest) (*admissionv1.CheckResponse, error) {
	p, err := principal.Require(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := s.check(ctx, p, req)
	return resp, translate(err)
}

// resolved is what the heads and the current policy say about a request.
type resolved struct {
	epoch  int64
	policy replica.Policy
	access decision.Access
	digest string // cache.ScopeSetDigest(access, nil)
	class  string
	// ptr is the pointer of (server, class) when hasPtr; kept by value so
	// that resolving allocates nothing for it.
	ptr    replica.Pointer
	hasPtr bool
	// rollout is the stage of (server, class) at epoch; nil for FULL.
	rollout *decision.Rollout
	// conditional is the view's: a grant naming the principal carries a
	// condition.
	conditional bool
}

// pointer returns the pointer the request resolved to; nil for none.
func (r *resolved) pointer() *replica.Pointer {
	if !r.hasPtr {
		return nil
	}
	return &r.ptr
}

func (s *Server) check(ctx context.Context, p principal.Principal, req *admissionv1.CheckRequest) (*admissionv1.CheckResponse, error) {
	now := s.o.Now()
	r := decision.Request{
		ToolID: req.GetToolId(), Generation: req.GetGeneration(), DescriptorDigest: req.GetDescriptorDigest(),
		PolicyEpoch: req.GetPolicyEpoch(), Mode: req.GetMode(), RunID: req.GetRunId(), AudienceClass: req.GetAudienceClass(),
		ShownDigest: req.GetShownDigest(),
	}
	parsed, problem := args.Parse(req.GetArguments(), s.o.Limits)
	r.ArgumentsProblem = problem
	f := decision.Facts{Now: now, Request: r, Tenant: p.Tenant, PolicyFreshUntil: s.o.Heads.FreshUntil()}
	if r.Mode == admissionv1.Mode_MODE_USER_CONFIRMED {
		// Only this mode reads the confirmer header: an autonomous Check
		// pays nothing for it.
		f.ConfirmerProblem = principal.ErrNoConfirmer.Error()
		if s.o.Confirmers != nil {
			if c, err := s.o.Confirmers.Confirmer(ctx); err != nil {
				f.ConfirmerProblem = err.Error()
			} else {
				f.Confirmer, f.ConfirmerProblem = c.Subject, ""
			}
		}
	}
	// The response, its receipt and their two timestamps are one
	// allocation (the receipt writer keeps the receipt, and so the rest,
	// until its batch is stored).
	a := &answer{}
	a.decidedAt = timestamppb.Timestamp{Seconds: now.Unix(), Nanos: int32(now.Nanosecond())}
	rec := &a.receipt
	rec.ReceiptId, rec.TenantId, rec.Subject = s.ids.next(), p.Tenant, p.Subject
	rec.ToolId, rec.ArgumentDigest, rec.Mode = bounded(r.ToolID, decision.MaxToolIDBytes), parsed.Digest, r.Mode
	rec.RunId, rec.DecidedAt, rec.Replica = bounded(r.RunID, decision.MaxRunIDBytes), &a.decidedAt, s.o.Replica
	if f.Confirmer != "" {
		// Who confirmed, when and what was shown: recorded whatever the
		// decision (a malformed digest is INVALID_INPUT, never recorded).
		rec.Confirmer, rec.ConfirmedAt = f.Confirmer, &a.decidedAt
		if canonical.ValidDigest(r.ShownDigest) {
			rec.ShownDigest = r.ShownDigest
		}
	}
	validUntil := f.PolicyFreshUntil
	level := cache.Miss

	out, done := decision.Early(f) // the request, tenant and freshness rules need no reads
	var entry cache.Entry
	var res resolved
	if !done {
		// Past those rules: resolve, then decide (from the cache when
		// possible), then check the arguments on every call.
		var err error
		if res, err = s.resolve(ctx, p, r); err != nil {
			return nil, err
		}
		if entry, level, err = s.decide(ctx, p, r, &f, &res); err != nil {
			return nil, err
		}
		if level != cache.Miss {
			// A cache answer leaves f as it was before the material was
			// read: the re-check fills in a copy.
			s.maybeAudit(ctx, p, r, f, res, entry.Reason, level, rec.ReceiptId)
		}
		out = decision.Outcome{Reason: entry.Reason, Detail: entry.Detail}
		rec.PolicyEpoch, rec.AudienceClass, rec.EffectClass = res.epoch, res.class, entry.Effect
		rec.DescriptorDigest = entry.ActiveDigest
		if ptr := res.pointer(); ptr != nil {
			rec.ServerId, rec.Generation = ptr.ServerID, ptr.Generation
			validUntil = earliest(validUntil, ptr.FreshUntil)
		}
		validUntil = earliest(validUntil, entry.ExpiresAt)
		if decision.Completes(out.Reason) {
			// The argument check and then the conditions run on every call,
			// after the cache and before a confirmation is asked for.
			ac := s.argCheck(ctx, res, entry, r, parsed)
			var cc decision.ConditionCheck
			if ac.Problem == "" && res.conditional {
				at := now
				if s.o.ConditionNow != nil {
					at = s.o.ConditionNow()
				}
				cc = decision.Conditions(res.policy.Grants, p.Subject, p.Groups, entry.Scope, res.class,
					conditionInput(p, r, res, entry, parsed, at))
			}
			out = decision.Final(out, ac, cc)
			if out.Allowed() {
				rec.AdmittingGrant = cc.Admitting
			}
		}
	}
	rec.Decision = admissionv1.Decision_DECISION_DENY
	if out.Allowed() {
		rec.Decision = admissionv1.Decision_DECISION_ALLOW
	}
	rec.Reason = out.Reason
	if err := s.o.Receipts.Add(rec); err != nil {
		return nil, err
	}
	if !out.Allowed() {
		s.logDenial(ctx, p, rec, out)
	}
	if s.o.Decided != nil {
		s.o.Decided(out.Reason, level)
	}
	if out.Allowed() && r.RunID != "" && s.o.Binder != nil {
		s.o.Binder.Bind(r.RunID, rec.ServerId, rec.AudienceClass, rec.Generation)
	}
	if validUntil.Before(now) {
		validUntil = now
	}
	a.validUntil = timestamppb.Timestamp{Seconds: validUntil.Unix(), Nanos: int32(validUntil.Nanosecond())}
	resp := &a.response
	resp.Decision, resp.Reason, resp.Detail, resp.Receipt = rec.Decision, out.Reason, out.Detail, rec
	resp.ValidUntil, resp.CurrentPolicyEpoch = &a.validUntil, rec.PolicyEpoch
	if out.Allowed() && s.o.Signing != nil {
		// Signed after the receipt was queued: a receipt the lease service
		// may redeem is always one admission keeps (GetReceipt, audit).
		signed, err := s.o.Signing.sign(rec, now, validUntil)
		if err != nil {
			return nil, err
		}
		resp.SignedReceipt = signed
	}
	if entry.ActiveDigest != "" {
		resp.CurrentGeneration, resp.CurrentDescriptorDigest = rec.Generation, entry.ActiveDigest
	}
	return resp, nil
}

// logDenial logs a denied Check at info: what a person running admission
// follows (an ALLOW is not logged; the access log has every call). The
// tool id and class are the receipt's, bounded; the detail never carries a
// credential or the arguments.
func (s *Server) logDenial(ctx context.Context, p principal.Principal, rec *admissionv1.Receipt, out decision.Outcome) {
	if !s.o.Logger.Enabled(ctx, slog.LevelInfo) {
		return
	}
	s.o.Logger.LogAttrs(ctx, slog.LevelInfo, "check denied",
		slog.String("reason", strings.TrimPrefix(out.Reason.String(), "DECISION_REASON_")), slog.String("detail", out.Detail),
		slog.String("tool_id", rec.ToolId), slog.String("audience_class", rec.AudienceClass),
		slog.String("tenant", p.Tenant), slog.String("subject", p.Subject), slog.String("receipt", rec.ReceiptId))
}

// answer is what one Check allocates for its answer.
type answer struct {
	response              admissionv1.CheckResponse
	receipt               admissionv1.Receipt
	decidedAt, validUntil timestamppb.Timestamp
}

// earliest returns the earlier of a and b, ignoring a zero b.
func earliest(a, b time.Time) time.Time {
	if !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

func bounded(s string, n int) string {
	if len(s) > n {
		return ""
	}
	return s
}

// epochOf returns the tenant's current epoch, learning it from the
// registry on the first call for a tenant.
func (s *Server) epochOf(ctx context.Context, tenant string) (int64, error) {
	if e, ok := s.o.Heads.Epoch(tenant); ok {
		return e, nil
	}
	pol, err := s.o.Material.Current(ctx, tenant)
	if err != nil {
		return 0, err
	}
	s.o.Heads.SetEpoch(tenant, pol.Epoch)
	e, _ := s.o.Heads.Epoch(tenant)
	return e, nil
}

// policy returns the tenant's policy at its current epoch. When the
// registry has already moved past the epoch the heads know, the newer
// policy is used and the heads learn its epoch.
func (s *Server) policy(ctx context.Context, tenant string, epoch int64) (replica.Policy, error) {
	pol, err := s.o.Material.PolicyAt(ctx, tenant, epoch)
	if errors.Is(err, replica.ErrNotKept) {
		pol, err = s.o.Material.Current(ctx, tenant)
		if err == nil && pol.Epoch < epoch {
			err = fmt.Errorf("the registry answered epoch %d, older than %d", pol.Epoch, epoch)
		}
		if err == nil {
			s.o.Heads.SetEpoch(tenant, pol.Epoch)
		}
	}
	if err != nil {
		return replica.Policy{}, unavailable(err)
	}
	return pol, nil
}

// viewOf returns p's access at the tenant's epoch (or the newer epoch the
// registry answered, see [Server.policy]), remembered per principal and
// epoch.
func (s *Server) viewOf(ctx context.Context, p principal.Principal, epoch int64) (*view, error) {
	k := viewKey{tenant: p.Tenant, epoch: epoch, subject: p.Subject, groups: strings.Join(p.Groups, "\x00")}
	if v, ok := s.views.Get(k); ok {
		return v, nil
	}
	pol, err := s.policy(ctx, p.Tenant, epoch)
	if err != nil {
		return nil, err
	}
	a := decision.Effective(pol.Grants, p.Subject, p.Groups)
	v := &view{policy: pol, access: a, digest: cache.ScopeSetDigest(a, nil)}
	for _, g := range pol.Grants {
		if g.Conditional() && g.Names(p.Subject, p.Groups) {
			v.conditional = true
		}
	}
	if pol.Epoch == epoch {
		s.views.Add(k, v)
	}
	return v, nil
}

// resolve finds the class the tool is read through and its pointer.
func (s *Server) resolve(ctx context.Context, p principal.Principal, r decision.Request) (resolved, error) {
	var res resolved
	epoch, err := s.epochOf(ctx, p.Tenant)
	if errors.Is(err, replica.ErrNotFound) {
		return res, nil // an unknown tenant sees nothing
	}
	if err != nil {
		return res, unavailable(err)
	}
	v, err := s.viewOf(ctx, p, epoch)
	if err != nil {
		return res, err
	}
	res.policy, res.epoch, res.access, res.digest = v.policy, v.policy.Epoch, v.access, v.digest
	res.conditional = v.conditional
	server := decision.ServerOf(r.ToolID)
	// The first class of the access that reads the server, preferring one
	// whose rollout stage serves it: a server in SHADOW for one class and
	// not for another is read through the other, as ListVisibleTools
	// lists it. Only when every such class is in SHADOW is the answer
	// that shadow.
	shadowed := ""
	for _, c := range res.access.Classes {
		if r.AudienceClass != "" && c != r.AudienceClass {
			continue
		}
		if slices.Contains(res.policy.Classes[c], server) {
			if res.policy.Rollout(server, c).Shadow() {
				if shadowed == "" {
					shadowed = c
				}
				continue
			}
			res.class = c
			break
		}
	}
	if res.class == "" && shadowed != "" {
		// In shadow the pair's generations are not served: its pointer
		// is not even read, and the receipt names no generation.
		res.class, res.rollout = shadowed, res.policy.Rollout(server, shadowed)
		return res, nil
	}
	if res.class == "" {
		return res, nil
	}
	res.rollout = res.policy.Rollout(server, res.class)
	ptr, ok := s.o.Heads.Pointer(server, res.class)
	if !ok {
		got, err := s.o.Pointers.Pointer(ctx, server, res.class)
		switch {
		case errors.Is(err, replica.ErrNotFound):
			return res, nil
		case err != nil:
			return res, unavailable(err)
		}
		s.o.Heads.SetPointer(got)
		ptr, _ = s.o.Heads.Pointer(server, res.class)
	}
	res.ptr, res.hasPtr = ptr, true
	return res, nil
}

// decide makes the preliminary decision from the cache or from the
// material, and caches it.
func (s *Server) decide(ctx context.Context, p principal.Principal, r decision.Request, f *decision.Facts, res *resolved) (cache.Entry, cache.Level, error) {
	f.Reachable = res.class != ""
	f.Class = res.class
	f.Current = res.access
	f.Rollout = res.rollout
	if r.PolicyEpoch > 0 && r.PolicyEpoch < res.epoch {
		if old, err := s.o.Material.PolicyAt(ctx, p.Tenant, r.PolicyEpoch); err == nil {
			a := decision.Effective(old.Grants, p.Subject, p.Groups)
			f.Planned = &a
			f.PlannedRollout = old.Rollout(decision.ServerOf(r.ToolID), res.class)
		}
	}
	if f.Planned != nil {
		res.digest = cache.ScopeSetDigest(f.Current, f.Planned)
	}
	if !f.Reachable {
		o := decision.Prelim(*f)
		return cache.Entry{Reason: o.Reason, Detail: o.Detail}, cache.Miss, nil
	}
	ptr := res.pointer()
	if ptr == nil {
		o := decision.Prelim(*f)
		return cache.Entry{Reason: o.Reason, Detail: o.Detail}, cache.Miss, nil
	}
	key := cache.Key{
		Tenant: p.Tenant, AudienceClass: res.class, PolicyEpoch: res.epoch, Generation: ptr.Generation,
		PointerRevision: ptr.Revision, ToolID: r.ToolID, DescriptorDigest: r.DescriptorDigest,
		ScopeSetDigest: res.digest, Mode: r.Mode,
		PlanGeneration: r.Generation, PlanEpoch: r.PolicyEpoch,
		CanaryRun: res.rollout.RunOf(ptr.ServerID, res.class, r.RunID),
	}
	if f.Planned != nil {
		key.PlanCanaryRun = f.PlannedRollout.RunOf(ptr.ServerID, res.class, r.RunID)
	}
	if e, lvl := s.o.Cache.Get(ctx, key); lvl != cache.Miss {
		// The pointer's freshness moves with time, not with the key.
		if !f.Now.Before(ptr.FreshUntil) {
			return cache.Entry{Reason: decision.StaleCatalog, Detail: "the generation is past its freshness; refreshes are failing"}, lvl, nil
		}
		return e, lvl, nil
	}
	e, err := s.prelim(ctx, p, r, f, res)
	if err != nil {
		return cache.Entry{}, cache.Miss, err
	}
	s.o.Cache.Put(key, e)
	return e, cache.Miss, nil
}

// prelim makes the preliminary decision of a reachable request with a
// pointer from the material (direct reads, never the decision cache):
// decide's miss path, and the auditor's re-check of a cached ALLOW.
func (s *Server) prelim(ctx context.Context, p principal.Principal, r decision.Request, f *decision.Facts, res *resolved) (cache.Entry, error) {
	ptr := res.pointer()
	if ptr == nil {
		return cache.Entry{}, errors.New("admission: a decision from material needs the pointer")
	}
	f.Pointer = &decision.Pointer{Generation: ptr.Generation, Closed: ptr.Closed, Unversioned: ptr.Unversioned, FreshUntil: ptr.FreshUntil}
	gen, err := s.o.Material.Generation(ctx, ptr.ServerID, res.class, ptr.Generation)
	if err != nil {
		return cache.Entry{}, unavailable(err)
	}
	var active *replica.ToolEntry
	if t := gen.Tools[r.ToolID]; t != nil {
		active = t
		f.ActiveTool = &decision.Tool{DescriptorDigest: t.DescriptorDigest, InputSchemaDigest: t.InputSchemaDigest}
	}
	switch {
	case r.Generation == ptr.Generation:
		f.PlanTool = f.ActiveTool
	case r.Generation < ptr.Generation:
		if old, err := s.o.Material.Generation(ctx, ptr.ServerID, res.class, r.Generation); err == nil {
			if t := old.Tools[r.ToolID]; t != nil {
				f.PlanTool = &decision.Tool{DescriptorDigest: t.DescriptorDigest, InputSchemaDigest: t.InputSchemaDigest}
			}
		} else if !errors.Is(err, replica.ErrNotFound) && !errors.Is(err, replica.ErrNotKept) {
			return cache.Entry{}, unavailable(err)
		}
	}
	if active != nil {
		f.Review, err = s.o.Material.Review(ctx, p.Tenant, res.epoch, res.class, r.ToolID, active.DescriptorDigest)
		if err != nil {
			return cache.Entry{}, unavailable(err)
		}
	}
	o := decision.Prelim(*f)
	e := cache.Entry{Reason: o.Reason, Detail: o.Detail, ServerID: ptr.ServerID, ExpiresAt: f.Now.Add(s.o.CacheTTL)}
	if ptr.FreshUntil.Before(e.ExpiresAt) {
		e.ExpiresAt = ptr.FreshUntil
	}
	if active != nil {
		e.ActiveDigest = active.DescriptorDigest
		e.InputSchemaDigest = active.InputSchemaDigest
	}
	if f.Review.Approved != nil {
		e.Effect = f.Review.Approved.Effect
		e.Scope, e.ApprovalDigest = f.Review.Approved.Scope, f.Review.Approved.ApprovalDigest
	}
	return e, nil
}

func (s *Server) argCheck(ctx context.Context, res resolved, e cache.Entry, r decision.Request, parsed args.Parsed) decision.ArgumentCheck {
	ptr := res.pointer()
	if ptr == nil {
		return decision.ArgumentCheck{Problem: "the input schema is not known", Pointer: "/"}
	}
	return s.o.Validator.Check(e.InputSchemaDigest, func() ([]byte, error) {
		gen, err := s.o.Material.Generation(ctx, ptr.ServerID, res.class, ptr.Generation)
		if err != nil {
			return nil, err
		}
		t := gen.Tools[r.ToolID]
		if t == nil {
			return nil, fmt.Errorf("tool not in generation")
		}
		return t.InputSchema, nil
	}, parsed.Value)
}

// conditionInput is what a grant's condition reads for this call: the
// verified principal (never a request field), the tool from the approved
// contract, the parsed arguments and the request at the decision time.
func conditionInput(p principal.Principal, r decision.Request, res resolved, e cache.Entry, parsed args.Parsed, now time.Time) *condition.Input {
	var scopes []string
	if e.Scope != "" {
		scopes = []string{e.Scope}
	}
	server := e.ServerID
	if server == "" {
		server = decision.ServerOf(r.ToolID)
	}
	return &condition.Input{
		Principal: condition.Principal{Subject: p.Subject, Tenant: p.Tenant, Groups: p.Groups, Claims: p.Claims},
		Tool: condition.Tool{ID: r.ToolID, Server: server, Effect: decision.EffectName(e.Effect), Scopes: scopes,
			ApprovalDigest: e.ApprovalDigest},
		Args:    parsed.Value,
		Request: condition.Request{Mode: decision.ModeName(r.Mode), RunID: r.RunID, Time: now},
	}
}

package decision

import (
	"fmt"
	"slices"
	"strings"
	"time"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/canonical"
	"github.com/toolcrib/toolcrib/platform/condition"
	"github.com/toolcrib/toolcrib/platform/ids"
)

// Reason aliases the shared enum so callers need not import catalogv1 for
// the constants below.
type Reason = catalogv1.DecisionReason

// The reasons, named once.
const (
	Allow                = catalogv1.DecisionReason_DECISION_REASON_ALLOW
	InvalidInput         = catalogv1.DecisionReason_DECISION_REASON_INVALID_INPUT
	NotFound             = catalogv1.DecisionReason_DECISION_REASON_NOT_FOUND
	Disabled             = catalogv1.DecisionReason_DECISION_REASON_DISABLED
	Unreviewed           = catalogv1.DecisionReason_DECISION_REASON_UNREVIEWED
	StaleSchema          = catalogv1.DecisionReason_DECISION_REASON_STALE_SCHEMA
	StaleCatalog         = catalogv1.DecisionReason_DECISION_REASON_STALE_CATALOG
	IncompleteDiscovery  = catalogv1.DecisionReason_DECISION_REASON_INCOMPLETE_DISCOVERY
	UnversionedSource    = catalogv1.DecisionReason_DECISION_REASON_UNVERSIONED_SOURCE
	StalePolicy          = catalogv1.DecisionReason_DECISION_REASON_STALE_POLICY
	PolicyRevoked        = catalogv1.DecisionReason_DECISION_REASON_POLICY_REVOKED
	Forbidden            = catalogv1.DecisionReason_DECISION_REASON_FORBIDDEN
	ArgumentsInvalid     = catalogv1.DecisionReason_DECISION_REASON_ARGUMENTS_INVALID
	ConfirmationRequired = catalogv1.DecisionReason_DECISION_REASON_CONFIRMATION_REQUIRED
	ServerClosed         = catalogv1.DecisionReason_DECISION_REASON_SERVER_CLOSED
	ConditionUnmet       = catalogv1.DecisionReason_DECISION_REASON_CONDITION_UNMET
)

// Order is the documented precedence (DESIGN §7, admission.proto): when
// several causes hold, the earliest is the answer. FORBIDDEN appears three
// times: an audience class of another tenant named in the request is
// decided right after INVALID_INPUT, then a MODE_USER_CONFIRMED request
// that no confirmer asserted (see [Facts].Confirmer); a scope the principal lacks shares its rank with
// POLICY_REVOKED (which of the two is decided by the policy at the plan's
// epoch, see [Decide]).
//
// The rollout stage of the tool's server for the class (see [Rollout])
// adds two rules that reuse reasons: SHADOW is NOT_FOUND (detail saying
// shadow) right after the reachability rule, and CANARY is FORBIDDEN
// (detail starting "canary:") right after the scope rank — POLICY_REVOKED
// when the stage at the plan's epoch would have admitted the call.
//
// ARGUMENTS_INVALID and CONDITION_UNMET come before CONFIRMATION_REQUIRED
// (issue 25): a person is never asked to confirm a call that would then be
// refused.
var Order = []Reason{
	InvalidInput, Forbidden, Forbidden, StalePolicy, NotFound, NotFound, ServerClosed, IncompleteDiscovery,
	StaleCatalog, Disabled, Unreviewed, StaleSchema, Forbidden, Forbidden, UnversionedSource,
	ArgumentsInvalid, ConditionUnmet, ConfirmationRequired, Allow,
}

// Limits on request fields (I12: bad input is refused whole). The id
// shapes are platform/ids' grammar.
const (
	MaxToolIDBytes = 200
	MaxRunIDBytes  = ids.MaxRunIDBytes
	MaxClassBytes  = ids.MaxClassBytes
)

// Request is the caller's half of a Check, as parsed at the boundary.
type Request struct {
	ToolID           string
	Generation       int64
	DescriptorDigest string
	// PolicyEpoch is the epoch the plan saw; 0 when unknown.
	PolicyEpoch int64
	Mode        admissionv1.Mode
	RunID       string
	// AudienceClass is the class the plan read the tool through; empty to
	// resolve it from the grants.
	AudienceClass string
	// ArgumentsProblem is non-empty when the arguments are not a JSON object
	// within the size cap (set by the parser at the boundary; bounded text).
	ArgumentsProblem string
	// ShownDigest is the digest of what the confirmer showed the user;
	// empty for none. Only with MODE_USER_CONFIRMED.
	ShownDigest string
}

// Validate returns the first problem of r as (field, message), or ("", "")
// when r is well formed. Messages never echo the field's value.
func (r Request) Validate() (field, problem string) {
	switch {
	case r.ToolID == "":
		return "tool_id", "required"
	case !ids.ValidToolID(r.ToolID):
		return "tool_id", "must be <server_id>.<tool name>"
	case r.Generation < 1:
		return "generation", "required, from 1"
	case r.DescriptorDigest == "":
		return "descriptor_digest", "required"
	case !canonical.ValidDigest(r.DescriptorDigest):
		return "descriptor_digest", "must be sha256:<64 lowercase hex>"
	case r.PolicyEpoch < 0:
		return "policy_epoch", "must not be negative"
	case r.Mode != admissionv1.Mode_MODE_AUTONOMOUS && r.Mode != admissionv1.Mode_MODE_USER_CONFIRMED:
		return "mode", "must be MODE_AUTONOMOUS or MODE_USER_CONFIRMED"
	case r.RunID != "" && !ids.ValidRunID(r.RunID):
		return "run_id", "must be 1-128 letters, digits, '_', '.', ':' or '-'"
	case r.AudienceClass != "" && !ids.ValidClass(r.AudienceClass):
		return "audience_class", "must be <tenant_id>.<class>"
	case r.ArgumentsProblem != "":
		return "arguments", r.ArgumentsProblem
	case r.ShownDigest != "" && r.Mode != admissionv1.Mode_MODE_USER_CONFIRMED:
		return "shown_digest", "only with MODE_USER_CONFIRMED"
	case r.ShownDigest != "" && !canonical.ValidDigest(r.ShownDigest):
		return "shown_digest", "must be sha256:<64 lowercase hex>"
	}
	return "", ""
}

// ServerOf returns the server id part of a well-formed tool id.
func ServerOf(toolID string) string {
	s, _, _ := strings.Cut(toolID, ".")
	return s
}

// Grant is one grant of a tenant's policy.
type Grant struct {
	// Subject or Group; exactly one is set.
	Subject, Group string
	Scopes         []string
	Classes        []string
	// ConditionText is the grant's CEL condition as stored; empty for none.
	// Condition is it compiled (once, when the policy is loaded); nil with
	// a non-empty ConditionText is a condition this replica cannot compile,
	// which never holds (fail closed).
	ConditionText string
	Condition     *condition.Expr
}

// Conditional reports whether the grant carries a condition.
func (g Grant) Conditional() bool { return g.ConditionText != "" }

// Name names the grant in a detail and a receipt: `subject:<sub>` or
// `group:<group>` (identifiers the registry bounded when written).
func (g Grant) Name() string {
	if g.Group != "" {
		return "group:" + g.Group
	}
	return "subject:" + g.Subject
}

// Names reports whether the grant names subject or one of groups.
func (g Grant) Names(subject string, groups []string) bool {
	return (g.Subject != "" && g.Subject == subject) || (g.Group != "" && slices.Contains(groups, g.Group))
}

// Access is what one principal holds at one epoch: the union of the grants
// naming its subject or one of its groups. Both lists are sorted sets.
type Access struct {
	Scopes  []string
	Classes []string
}

// Effective returns the access of (subject, groups) under grants.
func Effective(grants []Grant, subject string, groups []string) Access {
	var a Access
	for _, g := range grants {
		if g.Names(subject, groups) {
			a.Scopes = append(a.Scopes, g.Scopes...)
			a.Classes = append(a.Classes, g.Classes...)
		}
	}
	slices.Sort(a.Scopes)
	a.Scopes = slices.Compact(a.Scopes)
	slices.Sort(a.Classes)
	a.Classes = slices.Compact(a.Classes)
	return a
}

// HasScope reports whether a holds scope.
func (a Access) HasScope(scope string) bool {
	_, ok := slices.BinarySearch(a.Scopes, scope)
	return ok
}

// HasClass reports whether a reads tools as class.
func (a Access) HasClass(class string) bool {
	_, ok := slices.BinarySearch(a.Classes, class)
	return ok
}

// Pointer is the head of the active pointer the tool was resolved through.
type Pointer struct {
	// Generation is the active generation; when Closed, the last active one.
	Generation int64
	Closed     bool
	// Unversioned is true when the active generation is an
	// UNVERSIONED_OBSERVATION (I3).
	Unversioned bool
	// FreshUntil is the pointer's `fresh_until`; past it the pointer serves
	// nothing.
	FreshUntil time.Time
}

// Tool is one tool as listed by one generation.
type Tool struct {
	DescriptorDigest  string
	InputSchemaDigest string
}

// Contract is the part of the approved contract a decision reads.
type Contract struct {
	Effect       catalogv1.EffectClass
	Scope        string
	Confirmation registryv1.Confirmation
	// ApprovalDigest is the approval digest in force (a condition reads it
	// as `tool.approval_digest`).
	ApprovalDigest string
}

// Review is the registry's answer for the tool's descriptor in the active
// generation, at the tenant's current epoch.
type Review struct {
	// Known is false when the registry has no record of the tool (new tools
	// are disabled by default, so this is DISABLED).
	Known   bool
	Enabled bool
	// Approved is the approved contract whose approval binds the active
	// descriptor digest; nil when that digest is not approved.
	Approved *Contract
	// Trust is the trust level of the tool's server (registry.proto
	// TrustLevel). THIRD_PARTY — and UNSPECIFIED, a level not known, which
	// is treated as the least trusted — needs a user's confirmation for
	// every call with side effects, whatever the contract says.
	Trust registryv1.TrustLevel
}

// Facts is everything a decision reads. The caller gathers them; zero
// values are the fail-closed ones.
type Facts struct {
	// Now is the decision time.
	Now     time.Time
	Request Request
	// Tenant is the verified principal's tenant.
	Tenant string
	// Confirmer is the subject of the confirmer that asserted, beside the
	// principal's token, that the user confirmed the call (a verified token
	// of the confirmer role); empty when none did. ConfirmerProblem says
	// why not (bounded fixed text), for the detail.
	Confirmer        string
	ConfirmerProblem string
	// PolicyFreshUntil is the replica's freshness bound: the older of the
	// two streams' newest heartbeats plus the validity window. Zero (never
	// caught up) is stale.
	PolicyFreshUntil time.Time
	// Reachable is true when the tool's server is read by an audience class
	// of the principal's current access (the requested class, when one was
	// named). Class is that class.
	Reachable bool
	Class     string
	// Pointer is the head of (server, Class); nil when no generation was
	// ever proven for it.
	Pointer *Pointer
	// ActiveTool is the tool in the pointer's generation; nil when absent.
	ActiveTool *Tool
	// PlanTool is the tool in the plan's generation (Request.Generation);
	// nil when that generation is unknown or does not list the tool. When
	// the plan's generation is the pointer's, it is ActiveTool.
	PlanTool *Tool
	Review   Review
	// Current is the principal's access at the tenant's current epoch.
	Current Access
	// Planned is the principal's access at the plan's epoch, when the plan
	// named an older epoch and the policy at that epoch is known; nil
	// otherwise (then a scope denial is FORBIDDEN, never POLICY_REVOKED).
	Planned *Access
	// Rollout is the rollout stage of (server, Class) in the policy at the
	// epoch decided at; nil for FULL (a pair never set).
	Rollout *Rollout
	// PlannedRollout is the stage of (server, Class) at the plan's epoch;
	// read only when Planned is set (then nil is FULL).
	PlannedRollout *Rollout
	// Arguments is the argument check's result (see package args); only
	// read by [Final].
	Arguments ArgumentCheck
	// Conditions is the conditions' result ([Conditions]); only read by
	// [Final].
	Conditions ConditionCheck
}

// ArgumentCheck is the outcome of validating the arguments.
type ArgumentCheck struct {
	// Problem is empty when the arguments are valid; else a bounded text.
	Problem string
	// Pointer is the JSON pointer of the first violation in the arguments.
	Pointer string
}

// Outcome is a decision.
type Outcome struct {
	Reason Reason
	// Detail is for humans; bounded, never a credential.
	Detail string
}

// Allowed reports whether the outcome allows the call.
func (o Outcome) Allowed() bool { return o.Reason == Allow }

func deny(r Reason, format string, args ...any) Outcome {
	return Outcome{Reason: r, Detail: fmt.Sprintf(format, args...)}
}

// Decide makes the whole decision: [Prelim], then the argument check and
// the conditions.
func Decide(f Facts) Outcome { return Final(Prelim(f), f.Arguments, f.Conditions) }

// Final completes a preliminary decision (from [Prelim] or the decision
// cache) with the argument check and the grants' conditions, which run on
// every call. A preliminary CONFIRMATION_REQUIRED is completed like an
// ALLOW: the arguments and the conditions come before it in [Order], so a
// person is never asked to confirm a call that would then be refused.
func Final(pre Outcome, args ArgumentCheck, cond ConditionCheck) Outcome {
	if !Completes(pre.Reason) {
		return pre
	}
	if args.Problem != "" {
		ptr := args.Pointer
		if ptr == "" {
			ptr = "/"
		}
		return deny(ArgumentsInvalid, "arguments at %s: %s", ptr, args.Problem)
	}
	if cond.Unmet != "" {
		if cond.Failed {
			return deny(ConditionUnmet, "the condition of grant %s could not be evaluated (fail closed)", cond.Unmet)
		}
		return deny(ConditionUnmet, "the condition of grant %s is not met", cond.Unmet)
	}
	return pre
}

// Completes reports whether a preliminary reason is completed by [Final]
// (the argument check and the conditions): ALLOW and CONFIRMATION_REQUIRED.
func Completes(r Reason) bool { return r == Allow || r == ConfirmationRequired }

// NeedsConfirmation reports whether an autonomous call of a tool with this
// effect class and confirmation policy needs a user's confirmation.
// UNSPECIFIED effect is treated as DESTRUCTIVE.
func NeedsConfirmation(effect catalogv1.EffectClass, c registryv1.Confirmation) bool {
	switch c {
	case registryv1.Confirmation_CONFIRMATION_ALWAYS:
		return true
	case registryv1.Confirmation_CONFIRMATION_AUTONOMOUS_ALLOWED:
		return false
	}
	switch effect {
	case catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY, catalogv1.EffectClass_EFFECT_CLASS_RESERVATION:
		return false
	}
	return true
}

// Trusted reports whether the platform trusts the operator of a server of
// this level with autonomous calls that have side effects: first party and
// partners yes; third parties and an unknown level no.
func Trusted(t registryv1.TrustLevel) bool {
	return t == registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY || t == registryv1.TrustLevel_TRUST_LEVEL_PARTNER
}

// ConfirmationNeeded reports whether an autonomous call of a tool under
// contract c, on a server of trust level t, needs a user's confirmation:
// when the contract's effect and confirmation policy say so
// ([NeedsConfirmation]), and for every call with side effects on a server
// that is not [Trusted] (registry.proto TRUST_LEVEL_THIRD_PARTY), even
// when the contract allows autonomous calls.
func ConfirmationNeeded(c Contract, t registryv1.TrustLevel) bool {
	return NeedsConfirmation(c.Effect, c.Confirmation) || (SideEffects(c.Effect) && !Trusted(t))
}

// SideEffects reports whether calling a tool of this class changes the
// world; UNSPECIFIED does (treated as DESTRUCTIVE).
func SideEffects(effect catalogv1.EffectClass) bool {
	return effect != catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY
}

// Prelim decides everything but the argument check, in [Order]. The result
// depends only on fields the decision cache keys on (see package cache) and
// on Now through PolicyFreshUntil and Pointer.FreshUntil, which the caller
// checks again on a cache hit.
func Prelim(f Facts) Outcome {
	if o, done := Early(f); done {
		return o
	}
	return rest(f)
}

// DetailNoConfirmer starts the detail of the FORBIDDEN denial of a
// MODE_USER_CONFIRMED request that no confirmer asserted.
const DetailNoConfirmer = "a confirmer must assert the user's confirmation: a user-confirmed call needs, beside the user's token, " +
	"the token of a confirmer (the confirmer group of the platform tenant) in the toolcrib-confirmer metadata"

// Early applies the rules that need no reads (the request, the principal's
// tenant against a named class, who asserts a confirmation, the replica's
// freshness); done is false when
// none of them denies, and the caller goes on to resolve the tool.
func Early(f Facts) (o Outcome, done bool) {
	r := f.Request
	if field, problem := r.Validate(); field != "" {
		return deny(InvalidInput, "%s: %s", field, problem), true
	}
	if f.Now.IsZero() || f.Tenant == "" {
		return deny(InvalidInput, "the principal or the decision time is missing"), true
	}
	if r.AudienceClass != "" && ids.TenantOfClass(r.AudienceClass) != f.Tenant {
		return deny(Forbidden, "the audience class belongs to another tenant"), true
	}
	if r.Mode == admissionv1.Mode_MODE_USER_CONFIRMED && f.Confirmer == "" {
		o := deny(Forbidden, "%s", DetailNoConfirmer)
		if f.ConfirmerProblem != "" {
			o.Detail += ": " + f.ConfirmerProblem
		}
		return o, true
	}
	if f.PolicyFreshUntil.IsZero() || !f.Now.Before(f.PolicyFreshUntil) {
		return deny(StalePolicy, "this replica cannot prove its policy view is fresh; retry shortly"), true
	}
	return Outcome{}, false
}

func rest(f Facts) Outcome {
	r := f.Request
	p := f.Pointer
	if !f.Reachable {
		return deny(NotFound, "no tool %s is visible to the principal", r.ToolID)
	}
	if f.Rollout.Shadow() {
		return deny(NotFound, "the catalog of server %s is in shadow for %s: its generations are not served", ServerOf(r.ToolID), f.Class)
	}
	if p != nil && f.ActiveTool == nil && f.PlanTool == nil {
		return deny(NotFound, "no tool %s is visible to the principal", r.ToolID)
	}
	if p == nil {
		return deny(IncompleteDiscovery, "no proven generation exists for the tool's server in %s", f.Class)
	}
	if p.Closed {
		return deny(ServerClosed, "the tool's server is closed for %s", f.Class)
	}
	switch {
	case !f.Now.Before(p.FreshUntil):
		return deny(StaleCatalog, "generation %d is past its freshness; refreshes are failing", p.Generation)
	case f.ActiveTool == nil:
		return deny(StaleCatalog, "the tool is gone from the active generation %d", p.Generation)
	case r.Generation > p.Generation:
		return deny(StaleCatalog, "generation %d is not active (active: %d)", r.Generation, p.Generation)
	case r.Generation < p.Generation && f.PlanTool == nil:
		return deny(StaleCatalog, "generation %d is neither active nor compatible (active: %d)", r.Generation, p.Generation)
	}
	if !f.Review.Known || !f.Review.Enabled {
		return deny(Disabled, "the tool is disabled")
	}
	c := f.Review.Approved
	if c == nil {
		return deny(Unreviewed, "the tool's current descriptor and contract are not approved")
	}
	if r.DescriptorDigest != f.ActiveTool.DescriptorDigest {
		return deny(StaleSchema, "the plan's descriptor differs from the one in generation %d", p.Generation)
	}
	if !f.Current.HasScope(c.Scope) || !f.Current.HasClass(f.Class) {
		if f.Planned != nil && f.Planned.HasScope(c.Scope) && f.Planned.HasClass(f.Class) {
			return deny(PolicyRevoked, "the policy changed after the plan's epoch %d and no longer grants scope %s", r.PolicyEpoch, c.Scope)
		}
		return deny(Forbidden, "the principal does not hold scope %s", c.Scope)
	}
	if o, ok := f.Rollout.canary(ServerOf(r.ToolID), f.Class, r.RunID, c.Effect); !ok {
		// As for a scope: a canary denial the plan's epoch would not have
		// given (its stage admitted the run and effect, its grants the
		// scope and class) is POLICY_REVOKED.
		if f.Planned != nil && f.Planned.HasScope(c.Scope) && f.Planned.HasClass(f.Class) &&
			f.PlannedRollout.Admits(ServerOf(r.ToolID), f.Class, r.RunID, c.Effect) {
			o.Reason = PolicyRevoked
			o.Detail += fmt.Sprintf(" (the rollout stage changed after the plan's epoch %d)", r.PolicyEpoch)
		}
		return o
	}
	if p.Unversioned && r.Mode == admissionv1.Mode_MODE_AUTONOMOUS && SideEffects(c.Effect) {
		return deny(UnversionedSource, "the tool's source is unversioned; an autonomous call with side effects is never allowed")
	}
	if r.Mode == admissionv1.Mode_MODE_AUTONOMOUS && NeedsConfirmation(c.Effect, c.Confirmation) {
		return deny(ConfirmationRequired, "a %s tool needs a user-confirmed call", effectName(c.Effect))
	}
	if r.Mode == admissionv1.Mode_MODE_AUTONOMOUS && ConfirmationNeeded(*c, f.Review.Trust) {
		return deny(ConfirmationRequired, "the tool's server is not operated by a trusted party; a %s call needs a user-confirmed call", effectName(c.Effect))
	}
	return Outcome{Reason: Allow, Detail: "allowed"}
}

func effectName(e catalogv1.EffectClass) string {
	return strings.TrimPrefix(e.String(), "EFFECT_CLASS_")
}

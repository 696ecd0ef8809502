package admissionoracle

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// Reason is a decision reason (the shared enum of the catalog contract).
type Reason = catalogv1.DecisionReason

// Grant is one grant: to a subject or to a group.
type Grant struct {
	Subject, Group string
	Scopes         []string
	Classes        []string
	// Condition is the grant's condition (a member of the family [Cond]
	// models); the zero value is none.
	Condition Cond
}

// Contract is an approved contract's part a decision reads.
type Contract struct {
	Effect       catalogv1.EffectClass
	Scope        string
	Confirmation registryv1.Confirmation
}

// ToolReview is the registry's view of one tool at one epoch.
type ToolReview struct {
	Enabled bool
	// Trust is the trust level of the tool's server (registry.proto
	// TrustLevel): only FIRST_PARTY and PARTNER servers may be called
	// autonomously with side effects; THIRD_PARTY needs the user's
	// confirmation for every call with side effects, and an unknown level
	// (UNSPECIFIED) counts as the least trusted.
	Trust registryv1.TrustLevel
	// Approved maps a descriptor digest to the contract approved for it.
	Approved map[string]Contract
}

// Policy is one tenant's registry state at one epoch.
type Policy struct {
	Grants []Grant
	// Classes maps each class of the tenant to the servers it reads.
	Classes map[string][]string
	// Tools by tool id; absent: unknown to the registry.
	Tools map[string]ToolReview
}

// Tenant is a tenant's epochs.
type Tenant struct {
	Epoch int64
	// Policies the replica can read, by epoch (the current one included);
	// an epoch absent here is history the registry no longer keeps.
	Policies map[int64]*Policy
}

// PointerKey names an active pointer.
type PointerKey struct{ Server, Class string }

// Pointer is a pointer's head.
type Pointer struct {
	Generation  int64
	Closed      bool
	Unversioned bool
	FreshUntil  time.Time
}

// GenKey names a generation.
type GenKey struct {
	Server, Class string
	Generation    int64
}

// Prop is one property of an input schema.
type Prop struct {
	Name string
	// Type is "string", "integer", "number" or "boolean".
	Type string
}

// Schema is an input schema of the subset the randomized test uses: an
// object with typed properties, required names, and optionally no other
// properties.
type Schema struct {
	Props    []Prop
	Required []string
	Closed   bool
}

// JSON renders s as a JSON Schema (2020-12, no `$schema`).
func (s Schema) JSON() []byte {
	props := map[string]any{}
	for _, p := range s.Props {
		props[p.Name] = map[string]any{"type": p.Type}
	}
	doc := map[string]any{"type": "object", "properties": props}
	if len(s.Required) > 0 {
		doc["required"] = s.Required
	}
	if s.Closed {
		doc["additionalProperties"] = false
	}
	b, _ := json.Marshal(doc)
	return b
}

// Tool is one tool of a generation.
type Tool struct {
	Digest string
	Schema Schema
}

// State is what the replica knows.
type State struct {
	// Now is the decision time.
	Now time.Time
	// Fresh is false when a Watch stream sent no heartbeat within the
	// validity window.
	Fresh       bool
	Tenants     map[string]*Tenant
	Pointers    map[PointerKey]*Pointer
	Generations map[GenKey]map[string]Tool
}

// Request is a Check with its verified principal.
type Request struct {
	Subject, Tenant string
	Groups          []string
	ToolID          string
	Generation      int64
	Digest          string
	PlanEpoch       int64
	Mode            admissionv1.Mode
	RunID           string
	Class           string
	Arguments       []byte
	// Confirmer is whose token the confirmer header carries.
	Confirmer Confirmer
	// ShownDigest is CheckRequest.shown_digest.
	ShownDigest string
}

// Confirmer is whose token a request carries as its confirmer
// (`toolcrib-confirmer`), beside the principal's own.
type Confirmer int

// The confirmer headers a request may carry. Only [PlatformConfirmer] is a
// confirmer: a member of the confirmer group of the platform tenant.
const (
	// NoConfirmer: no confirmer header.
	NoConfirmer Confirmer = iota
	// PlatformConfirmer: a confirmer-group member of the platform tenant.
	PlatformConfirmer
	// TenantConfirmerGroup: a tenant's user in a group named like the
	// confirmer group (group names are the tenant's own: no role).
	TenantConfirmerGroup
	// PlatformService: the platform's service role (not a confirmer).
	PlatformService
	// InvalidConfirmerToken: a token that does not verify.
	InvalidConfirmerToken
)

var (
	serverRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	nameRe   = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
	digestRe = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	runRe    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`)
	tenantRe = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	classRe  = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
)

func validToolID(id string) bool {
	i := strings.IndexByte(id, '.')
	return i > 0 && serverRe.MatchString(id[:i]) && nameRe.MatchString(id[i+1:])
}

func validClass(c string) bool {
	i := strings.IndexByte(c, '.')
	return i > 0 && tenantRe.MatchString(c[:i]) && classRe.MatchString(c[i+1:])
}

// Limits are the replica's published caps on one call's arguments: the
// document's size in bytes, the nesting of objects and arrays (the
// top-level object is level 1) and the number of values (containers
// included).
type Limits struct{ MaxBytes, MaxDepth, MaxValues int }

// DefaultLimits are admission's defaults (`--max-argument-bytes` 64 KiB).
var DefaultLimits = Limits{MaxBytes: 64 << 10, MaxDepth: 32, MaxValues: 4096}

// arguments decodes the arguments; ok false when they are not an I-JSON
// (RFC 7493) object within the caps: UTF-8, no duplicate member names,
// numbers an IEEE double can hold — what RFC 8785, the canonical form the
// arguments digest is taken over, requires. Empty means `{}`.
func arguments(raw []byte, lim Limits) (map[string]any, bool) {
	if len(raw) == 0 {
		return map[string]any{}, true
	}
	if len(raw) > lim.MaxBytes || !utf8.Valid(raw) || !json.Valid(raw) {
		return nil, false
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	// Walk the tokens: duplicate names, numbers, depth and value count.
	type frame struct {
		object bool
		names  map[string]bool
		key    bool // the next token of an object is a member name
	}
	var stack []*frame
	values := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if delim, ok := tok.(json.Delim); ok && (delim == '}' || delim == ']') {
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].object {
				stack[len(stack)-1].key = true
			}
			continue
		}
		if top != nil && top.object && top.key {
			name := tok.(string)
			if top.names[name] {
				return nil, false
			}
			top.names[name] = true
			top.key = false
			continue
		}
		values++
		if values > lim.MaxValues {
			return nil, false
		}
		switch x := tok.(type) {
		case json.Delim:
			if len(stack)+1 > lim.MaxDepth {
				return nil, false
			}
			stack = append(stack, &frame{object: x == '{', names: map[string]bool{}, key: x == '{'})
			continue
		case json.Number:
			if f, err := strconv.ParseFloat(string(x), 64); err != nil || math.IsInf(f, 0) {
				return nil, false
			}
		}
		if top != nil && top.object {
			top.key = true
		}
	}
	var v any
	d = json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return nil, false
	}
	m, ok := v.(map[string]any)
	return m, ok
}

// access is the classes and scopes the principal holds under grants,
// every grant counted whatever its condition.
func access(grants []Grant, subject string, groups []string) (classes, scopes map[string]bool) {
	return counted(grants, subject, groups, func(Grant) bool { return true })
}

// counted is the classes and scopes of the principal's grants for which
// counts holds.
func counted(grants []Grant, subject string, groups []string, counts func(Grant) bool) (classes, scopes map[string]bool) {
	classes, scopes = map[string]bool{}, map[string]bool{}
	for _, g := range grants {
		mine := (g.Subject != "" && g.Subject == subject) || (g.Group != "" && slices.Contains(groups, g.Group))
		if !mine || !counts(g) {
			continue
		}
		for _, c := range g.Classes {
			classes[c] = true
		}
		for _, s := range g.Scopes {
			scopes[s] = true
		}
	}
	return classes, scopes
}

// Decide returns the reason DESIGN §7 gives for r in s.
func Decide(s *State, r Request) Reason {
	args, argsOK := arguments(r.Arguments, DefaultLimits)
	switch {
	case !validToolID(r.ToolID) || r.Generation < 1 || !digestRe.MatchString(r.Digest) || r.PlanEpoch < 0,
		r.Mode != admissionv1.Mode_MODE_AUTONOMOUS && r.Mode != admissionv1.Mode_MODE_USER_CONFIRMED,
		r.RunID != "" && !runRe.MatchString(r.RunID),
		r.Class != "" && !validClass(r.Class),
		!argsOK,
		r.ShownDigest != "" && (r.Mode != admissionv1.Mode_MODE_USER_CONFIRMED || !digestRe.MatchString(r.ShownDigest)):
		return catalogv1.DecisionReason_DECISION_REASON_INVALID_INPUT
	}
	if r.Class != "" && r.Class[:strings.IndexByte(r.Class, '.')] != r.Tenant {
		return catalogv1.DecisionReason_DECISION_REASON_FORBIDDEN
	}
	if r.Mode == admissionv1.Mode_MODE_USER_CONFIRMED && r.Confirmer != PlatformConfirmer {
		return catalogv1.DecisionReason_DECISION_REASON_FORBIDDEN
	}
	if !s.Fresh {
		return catalogv1.DecisionReason_DECISION_REASON_STALE_POLICY
	}
	notFound := catalogv1.DecisionReason_DECISION_REASON_NOT_FOUND
	tn := s.Tenants[r.Tenant]
	if tn == nil {
		return notFound
	}
	cur := tn.Policies[tn.Epoch]
	classes, scopes := access(cur.Grants, r.Subject, r.Groups)
	server := r.ToolID[:strings.IndexByte(r.ToolID, '.')]
	var names []string
	for c := range classes {
		if (r.Class == "" || c == r.Class) && slices.Contains(cur.Classes[c], server) {
			names = append(names, c)
		}
	}
	if len(names) == 0 {
		return notFound
	}
	slices.Sort(names)
	class := names[0]
	ptr := s.Pointers[PointerKey{server, class}]
	if ptr == nil {
		return catalogv1.DecisionReason_DECISION_REASON_INCOMPLETE_DISCOVERY
	}
	activeGen := s.Generations[GenKey{server, class, ptr.Generation}]
	active, inActive := activeGen[r.ToolID]
	var inPlan bool
	if r.Generation == ptr.Generation {
		inPlan = inActive
	} else if r.Generation < ptr.Generation {
		_, inPlan = s.Generations[GenKey{server, class, r.Generation}][r.ToolID]
	}
	if !inActive && !inPlan {
		return notFound
	}
	if ptr.Closed {
		return catalogv1.DecisionReason_DECISION_REASON_SERVER_CLOSED
	}
	if !s.Now.Before(ptr.FreshUntil) || !inActive || r.Generation > ptr.Generation || !inPlan {
		return catalogv1.DecisionReason_DECISION_REASON_STALE_CATALOG
	}
	review, known := cur.Tools[r.ToolID]
	if !known || !review.Enabled {
		return catalogv1.DecisionReason_DECISION_REASON_DISABLED
	}
	contract, approved := review.Approved[active.Digest]
	if !approved {
		return catalogv1.DecisionReason_DECISION_REASON_UNREVIEWED
	}
	if r.Digest != active.Digest {
		return catalogv1.DecisionReason_DECISION_REASON_STALE_SCHEMA
	}
	if !scopes[contract.Scope] {
		if r.PlanEpoch > 0 && r.PlanEpoch < tn.Epoch {
			if old := tn.Policies[r.PlanEpoch]; old != nil {
				oc, os := access(old.Grants, r.Subject, r.Groups)
				if oc[class] && os[contract.Scope] {
					return catalogv1.DecisionReason_DECISION_REASON_POLICY_REVOKED
				}
			}
		}
		return catalogv1.DecisionReason_DECISION_REASON_FORBIDDEN
	}
	autonomous := r.Mode == admissionv1.Mode_MODE_AUTONOMOUS
	if autonomous && ptr.Unversioned && contract.Effect != catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY {
		return catalogv1.DecisionReason_DECISION_REASON_UNVERSIONED_SOURCE
	}
	if !valid(active.Schema, args) {
		return catalogv1.DecisionReason_DECISION_REASON_ARGUMENTS_INVALID
	}
	// Conditions: a grant counts when it has none or its condition holds
	// for this call; the counted grants must still give scope and class.
	cc, cs := counted(cur.Grants, r.Subject, r.Groups, func(g Grant) bool { return g.Condition.Holds(r, args, contract) })
	if !cc[class] || !cs[contract.Scope] {
		return catalogv1.DecisionReason_DECISION_REASON_CONDITION_UNMET
	}
	if autonomous && needsConfirmation(contract) {
		return catalogv1.DecisionReason_DECISION_REASON_CONFIRMATION_REQUIRED
	}
	if autonomous && contract.Effect != catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY &&
		review.Trust != registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY && review.Trust != registryv1.TrustLevel_TRUST_LEVEL_PARTNER {
		return catalogv1.DecisionReason_DECISION_REASON_CONFIRMATION_REQUIRED
	}
	return catalogv1.DecisionReason_DECISION_REASON_ALLOW
}

func needsConfirmation(c Contract) bool {
	switch c.Confirmation {
	case registryv1.Confirmation_CONFIRMATION_ALWAYS:
		return true
	case registryv1.Confirmation_CONFIRMATION_AUTONOMOUS_ALLOWED:
		return false
	}
	switch c.Effect {
	case catalogv1.EffectClass_EFFECT_CLASS_WRITE, catalogv1.EffectClass_EFFECT_CLASS_DESTRUCTIVE,
		catalogv1.EffectClass_EFFECT_CLASS_UNSPECIFIED:
		return true
	}
	return false
}

// valid checks args against the schema subset.
func valid(s Schema, args map[string]any) bool {
	for _, name := range s.Required {
		if _, ok := args[name]; !ok {
			return false
		}
	}
	for name, v := range args {
		i := slices.IndexFunc(s.Props, func(p Prop) bool { return p.Name == name })
		if i < 0 {
			if s.Closed {
				return false
			}
			continue
		}
		if !hasType(v, s.Props[i].Type) {
			return false
		}
	}
	return true
}

func hasType(v any, typ string) bool {
	switch x := v.(type) {
	case string:
		return typ == "string"
	case bool:
		return typ == "boolean"
	case json.Number:
		if typ == "number" {
			return true
		}
		if typ != "integer" {
			return false
		}
		// An integer is a number with no fractional part (1.0 counts).
		s := string(x)
		if i := strings.IndexAny(s, ".eE"); i < 0 {
			return true
		}
		f, err := x.Float64()
		return err == nil && f == float64(int64(f))
	}
	return false
}

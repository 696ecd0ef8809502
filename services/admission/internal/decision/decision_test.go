package decision

import (
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

var (
	t0     = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	digest = func(c string) string { return "sha256:" + strings.Repeat(c, 64) }
)

// allowFacts is a call that every rule allows: the seed's shipment_status
// tool, enabled, approved at the active digest, read-only, the principal
// holding its scope and class, the plan made against the active generation.
func allowFacts() Facts {
	tool := &Tool{DescriptorDigest: digest("a"), InputSchemaDigest: digest("c")}
	return Facts{
		Now: t0,
		Request: Request{ToolID: "logistics.shipment_status", Generation: 7, DescriptorDigest: digest("a"),
			PolicyEpoch: 5, Mode: admissionv1.Mode_MODE_AUTONOMOUS},
		Tenant:           "demo-a",
		PolicyFreshUntil: t0.Add(time.Second),
		Reachable:        true,
		Class:            "demo-a.readers",
		Pointer:          &Pointer{Generation: 7, FreshUntil: t0.Add(time.Hour)},
		ActiveTool:       tool,
		PlanTool:         tool,
		Review: Review{Known: true, Enabled: true, Approved: &Contract{
			Effect: catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY, Scope: "shipment:read"},
			Trust: registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY},
		Current: Access{Scopes: []string{"shipment:read"}, Classes: []string{"demo-a.readers"}},
	}
}

// cause makes one reason hold while keeping every other fact as it was, as
// far as the two can coexist.
type cause struct {
	reason Reason
	name   string
	apply  func(*Facts)
	// tag, when set, is a text the answer's detail holds when this cause
	// decides (it tells apart two causes sharing a reason).
	tag string
}

// causes are listed in the documented order.
var causes = []cause{
	{InvalidInput, "invalid input", func(f *Facts) { f.Request.ToolID = "" }, ""},
	{Forbidden, "class of another tenant", func(f *Facts) { f.Request.AudienceClass = "demo-b.readers" }, "another tenant"},
	{Forbidden, "user-confirmed, no confirmer", func(f *Facts) {
		f.Request.Mode = admissionv1.Mode_MODE_USER_CONFIRMED
		f.Confirmer = ""
	}, "a confirmer must assert"},
	{StalePolicy, "stale policy", func(f *Facts) { f.PolicyFreshUntil = f.Now }, ""},
	{NotFound, "not visible", func(f *Facts) { f.Reachable = false }, "is visible"},
	{NotFound, "shadow", func(f *Facts) { f.Rollout = &Rollout{Stage: registryv1.Stage_STAGE_SHADOW} }, "in shadow"},
	{ServerClosed, "server closed", func(f *Facts) {
		if f.Pointer == nil {
			f.Pointer = &Pointer{Generation: 7, FreshUntil: t0.Add(time.Hour)}
		}
		f.Pointer.Closed = true
	}, ""},
	{IncompleteDiscovery, "no proven generation", func(f *Facts) { f.Pointer = nil }, ""},
	{StaleCatalog, "pointer past fresh_until", func(f *Facts) {
		if f.Pointer != nil {
			f.Pointer.FreshUntil = f.Now
		}
	}, ""},
	{Disabled, "disabled", func(f *Facts) { f.Review.Enabled = false }, ""},
	{Unreviewed, "unreviewed", func(f *Facts) { f.Review.Approved = nil }, ""},
	{StaleSchema, "stale schema", func(f *Facts) { f.Request.DescriptorDigest = digest("b") }, ""},
	{Forbidden, "scope not held", func(f *Facts) { f.Current.Scopes = nil }, "does not hold scope"},
	{Forbidden, "canary, run outside", func(f *Facts) {
		f.Request.RunID = runOutside
		f.Rollout = &Rollout{Stage: registryv1.Stage_STAGE_CANARY, Percent: 50,
			Effects: []catalogv1.EffectClass{catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY}}
	}, "canary:"},
	{UnversionedSource, "unversioned, side effects", func(f *Facts) {
		if f.Pointer != nil {
			f.Pointer.Unversioned = true
		}
		if f.Review.Approved != nil {
			f.Review.Approved.Effect = catalogv1.EffectClass_EFFECT_CLASS_RESERVATION
		}
	}, ""},
	{ArgumentsInvalid, "arguments", func(f *Facts) { f.Arguments = ArgumentCheck{Problem: "missing property", Pointer: "/id"} }, ""},
	{ConditionUnmet, "condition unmet", func(f *Facts) { f.Conditions = ConditionCheck{Unmet: "group:readers"} }, "group:readers"},
	{ConfirmationRequired, "confirmation", func(f *Facts) {
		if f.Review.Approved != nil {
			f.Review.Approved.Confirmation = registryv1.Confirmation_CONFIRMATION_ALWAYS
		}
	}, ""},
}

func clone(f Facts) Facts {
	if f.Pointer != nil {
		p := *f.Pointer
		f.Pointer = &p
	}
	if f.Review.Approved != nil {
		c := *f.Review.Approved
		f.Review.Approved = &c
	}
	f.Current.Scopes = append([]string(nil), f.Current.Scopes...)
	if f.Rollout != nil {
		ro := *f.Rollout
		ro.Effects = append([]catalogv1.EffectClass(nil), ro.Effects...)
		f.Rollout = &ro
	}
	return f
}

// decides reports whether o is the answer of cause c.
func (c cause) decides(o Outcome) bool {
	return o.Reason == c.reason && strings.Contains(o.Detail, c.tag)
}

// exclusive are adjacent pairs whose causes cannot hold together for one
// (server, audience class): without a pointer there is no closed pointer
// and no generation to be stale.
var exclusive = map[[2]Reason]bool{
	{ServerClosed, IncompleteDiscovery}: true,
	{IncompleteDiscovery, StaleCatalog}: true,
}

func TestAllowBase(t *testing.T) {
	if o := Decide(allowFacts()); o.Reason != Allow {
		t.Fatalf("base facts: %v %q", o.Reason, o.Detail)
	}
}

func TestEachCauseAlone(t *testing.T) {
	for _, c := range causes {
		f := clone(allowFacts())
		c.apply(&f)
		if got := Decide(f); !c.decides(got) {
			t.Errorf("%s alone: %v %q, want %v (%q)", c.name, got.Reason, got.Detail, c.reason, c.tag)
		}
	}
}

// TestAdjacentPairs makes every two neighbouring causes of the order hold at
// once and expects the earlier one.
func TestAdjacentPairs(t *testing.T) {
	if len(causes) != len(Order)-1 {
		t.Fatalf("%d causes for an order of %d", len(causes), len(Order))
	}
	for i := range causes {
		if causes[i].reason != Order[i] {
			t.Fatalf("cause %d is %v, the order says %v", i, causes[i].reason, Order[i])
		}
	}
	for i := 0; i+1 < len(causes); i++ {
		a, b := causes[i], causes[i+1]
		f := clone(allowFacts())
		b.apply(&f)
		a.apply(&f)
		got := Decide(f)
		if exclusive[[2]Reason{a.reason, b.reason}] {
			// a's cause replaced b's; the pair still answers a.
			if !a.decides(got) {
				t.Errorf("%s + %s (exclusive): %v %q, want %v", a.name, b.name, got.Reason, got.Detail, a.reason)
			}
			continue
		}
		if !a.decides(got) {
			t.Errorf("%s + %s: %v %q, want %v (%q)", a.name, b.name, got.Reason, got.Detail, a.reason, a.tag)
		}
	}
}

// TestEverySuffix makes all causes from position i on hold at once: the
// answer is the i-th.
func TestEverySuffix(t *testing.T) {
	for i := range causes {
		f := clone(allowFacts())
		for j := len(causes) - 1; j >= i; j-- {
			causes[j].apply(&f)
		}
		if got := Decide(f); !causes[i].decides(got) {
			t.Errorf("causes %s..: %v %q, want %v (%q)", causes[i].name, got.Reason, got.Detail, causes[i].reason, causes[i].tag)
		}
	}
}

func TestPolicyRevokedOnlyWhenThePlansEpochAllowed(t *testing.T) {
	cases := []struct {
		name    string
		planned *Access
		want    Reason
	}{
		{"policy at the plan's epoch granted the scope", &Access{Scopes: []string{"shipment:read"}, Classes: []string{"demo-a.readers"}}, PolicyRevoked},
		{"policy at the plan's epoch did not grant it either", &Access{Classes: []string{"demo-a.readers"}}, Forbidden},
		{"plan's epoch granted the scope but not the class", &Access{Scopes: []string{"shipment:read"}}, Forbidden},
		{"no policy at the plan's epoch", nil, Forbidden},
	}
	for _, tc := range cases {
		f := clone(allowFacts())
		f.Current.Scopes = []string{"shipment:write"}
		f.Planned = tc.planned
		if got := Decide(f).Reason; got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		// POLICY_REVOKED and FORBIDDEN share a rank: both before
		// UNVERSIONED_SOURCE, both after STALE_SCHEMA.
		f.Pointer.Unversioned = true
		f.Review.Approved.Effect = catalogv1.EffectClass_EFFECT_CLASS_WRITE
		if got := Decide(f).Reason; got != tc.want {
			t.Errorf("%s, unversioned: %v, want %v", tc.name, got, tc.want)
		}
		f.Request.DescriptorDigest = digest("b")
		if got := Decide(f).Reason; got != StaleSchema {
			t.Errorf("%s, stale schema: %v, want STALE_SCHEMA", tc.name, got)
		}
	}
}

func TestCompatibleGenerations(t *testing.T) {
	old := &Tool{DescriptorDigest: digest("a")}
	changed := &Tool{DescriptorDigest: digest("9")}
	cases := []struct {
		name       string
		planGen    int64
		planTool   *Tool
		activeTool *Tool
		reqDigest  string
		want       Reason
	}{
		{"plan on N, tool unchanged in N+1", 7, old, old, digest("a"), Allow},
		{"plan on N, tool gone in N+1", 7, old, nil, digest("a"), StaleCatalog},
		{"plan on N, digest changed in N+1", 7, old, changed, digest("a"), StaleSchema},
		{"plan on N, N unknown (no longer kept)", 7, nil, old, digest("a"), StaleCatalog},
		{"plan ahead of the active generation", 9, nil, old, digest("a"), StaleCatalog},
		{"tool in neither generation", 7, nil, nil, digest("a"), NotFound},
	}
	for _, tc := range cases {
		f := clone(allowFacts())
		f.Pointer.Generation = 8
		f.Request.Generation = tc.planGen
		f.Request.DescriptorDigest = tc.reqDigest
		f.PlanTool, f.ActiveTool = tc.planTool, tc.activeTool
		if got := Decide(f).Reason; got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestEffectsAndConfirmation(t *testing.T) {
	const (
		auto = admissionv1.Mode_MODE_AUTONOMOUS
		user = admissionv1.Mode_MODE_USER_CONFIRMED
	)
	type E = catalogv1.EffectClass
	cases := []struct {
		effect      E
		conf        registryv1.Confirmation
		mode        admissionv1.Mode
		unversioned bool
		want        Reason
	}{
		{catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY, 0, auto, false, Allow},
		{catalogv1.EffectClass_EFFECT_CLASS_RESERVATION, 0, auto, false, Allow},
		{catalogv1.EffectClass_EFFECT_CLASS_WRITE, 0, auto, false, ConfirmationRequired},
		{catalogv1.EffectClass_EFFECT_CLASS_WRITE, 0, user, false, Allow},
		{catalogv1.EffectClass_EFFECT_CLASS_DESTRUCTIVE, 0, auto, false, ConfirmationRequired},
		{catalogv1.EffectClass_EFFECT_CLASS_UNSPECIFIED, 0, auto, false, ConfirmationRequired},
		{catalogv1.EffectClass_EFFECT_CLASS_DESTRUCTIVE, registryv1.Confirmation_CONFIRMATION_AUTONOMOUS_ALLOWED, auto, false, Allow},
		{catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY, registryv1.Confirmation_CONFIRMATION_ALWAYS, auto, false, ConfirmationRequired},
		{catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY, registryv1.Confirmation_CONFIRMATION_ALWAYS, user, false, Allow},
		// I3: unversioned sources never get an autonomous call with side effects.
		{catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY, 0, auto, true, Allow},
		{catalogv1.EffectClass_EFFECT_CLASS_RESERVATION, 0, auto, true, UnversionedSource},
		{catalogv1.EffectClass_EFFECT_CLASS_DESTRUCTIVE, registryv1.Confirmation_CONFIRMATION_AUTONOMOUS_ALLOWED, auto, true, UnversionedSource},
		{catalogv1.EffectClass_EFFECT_CLASS_WRITE, 0, user, true, Allow},
	}
	for _, tc := range cases {
		f := clone(allowFacts())
		f.Review.Approved.Effect, f.Review.Approved.Confirmation = tc.effect, tc.conf
		f.Review.Trust = registryv1.TrustLevel_TRUST_LEVEL_PARTNER
		f.Request.Mode = tc.mode
		if tc.mode == user {
			f.Confirmer = "gateway" // the mode is asserted by a confirmer
		}
		f.Pointer.Unversioned = tc.unversioned
		if got := Decide(f).Reason; got != tc.want {
			t.Errorf("%v/%v/%v/unversioned=%v: %v, want %v", tc.effect, tc.conf, tc.mode, tc.unversioned, got, tc.want)
		}
	}
}

func TestArgumentsDetailNamesThePointer(t *testing.T) {
	f := allowFacts()
	f.Arguments = ArgumentCheck{Problem: "got string, want integer", Pointer: "/items/3/qty"}
	o := Decide(f)
	if o.Reason != ArgumentsInvalid || !strings.Contains(o.Detail, "/items/3/qty") {
		t.Fatalf("%v %q", o.Reason, o.Detail)
	}
	// A preliminary denial is not turned into ARGUMENTS_INVALID.
	if got := Final(Outcome{Reason: Disabled}, f.Arguments, ConditionCheck{Unmet: "group:x"}).Reason; got != Disabled {
		t.Fatalf("Final over a denial: %v", got)
	}
}

func TestEffective(t *testing.T) {
	grants := []Grant{
		{Subject: "alice", Scopes: []string{"b", "a"}, Classes: []string{"t.x"}},
		{Group: "ops", Scopes: []string{"a", "c"}, Classes: []string{"t.y"}},
		{Subject: "bob", Scopes: []string{"z"}},
		{Group: "other", Scopes: []string{"y"}},
	}
	a := Effective(grants, "alice", []string{"ops"})
	if fmt.Sprint(a.Scopes) != "[a b c]" || fmt.Sprint(a.Classes) != "[t.x t.y]" {
		t.Fatalf("%+v", a)
	}
	if !a.HasScope("c") || a.HasScope("z") || !a.HasClass("t.y") {
		t.Fatalf("lookups on %+v", a)
	}
	if e := Effective(grants, "", []string{""}); len(e.Scopes) != 0 {
		t.Fatalf("empty subject and group matched: %+v", e)
	}
}

func TestRequestValidate(t *testing.T) {
	ok := allowFacts().Request
	cases := []struct {
		field string
		mut   func(*Request)
	}{
		{"tool_id", func(r *Request) { r.ToolID = "" }},
		{"tool_id", func(r *Request) { r.ToolID = "no-dot" }},
		{"tool_id", func(r *Request) { r.ToolID = "srv." + strings.Repeat("x", 300) }},
		{"tool_id", func(r *Request) { r.ToolID = "Srv.tool\n" }},
		{"generation", func(r *Request) { r.Generation = 0 }},
		{"generation", func(r *Request) { r.Generation = -1 }},
		{"descriptor_digest", func(r *Request) { r.DescriptorDigest = "" }},
		{"descriptor_digest", func(r *Request) { r.DescriptorDigest = "sha256:XYZ" }},
		{"policy_epoch", func(r *Request) { r.PolicyEpoch = -3 }},
		{"mode", func(r *Request) { r.Mode = 7 }},
		{"run_id", func(r *Request) { r.RunID = strings.Repeat("r", 129) }},
		{"audience_class", func(r *Request) { r.AudienceClass = "noclass" }},
		{"arguments", func(r *Request) { r.ArgumentsProblem = "not a JSON object" }},
	}
	for _, tc := range cases {
		r := ok
		tc.mut(&r)
		field, problem := r.Validate()
		if field != tc.field || problem == "" {
			t.Errorf("want %s, got %q %q", tc.field, field, problem)
		}
		if strings.Contains(problem, strings.Repeat("x", 50)) {
			t.Errorf("%s: the message echoes the value", tc.field)
		}
	}
	if f, _ := ok.Validate(); f != "" {
		t.Fatalf("valid request refused at %s", f)
	}
}

// TestTrustLevel: a server that is not trusted (THIRD_PARTY, or a level not
// known) gets no autonomous call with side effects, even when its
// contract allows autonomous calls: CONFIRMATION_REQUIRED, after
// UNVERSIONED_SOURCE and before ARGUMENTS_INVALID. Read-only calls and
// user-confirmed calls are unaffected; first-party and partner servers
// follow the contract alone.
func TestTrustLevel(t *testing.T) {
	const (
		auto  = admissionv1.Mode_MODE_AUTONOMOUS
		user  = admissionv1.Mode_MODE_USER_CONFIRMED
		first = registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY
		part  = registryv1.TrustLevel_TRUST_LEVEL_PARTNER
		third = registryv1.TrustLevel_TRUST_LEVEL_THIRD_PARTY
		unset = registryv1.TrustLevel_TRUST_LEVEL_UNSPECIFIED
		free  = registryv1.Confirmation_CONFIRMATION_AUTONOMOUS_ALLOWED
	)
	type E = catalogv1.EffectClass
	cases := []struct {
		trust  registryv1.TrustLevel
		effect E
		conf   registryv1.Confirmation
		mode   admissionv1.Mode
		want   Reason
	}{
		{first, catalogv1.EffectClass_EFFECT_CLASS_WRITE, free, auto, Allow},
		{part, catalogv1.EffectClass_EFFECT_CLASS_DESTRUCTIVE, free, auto, Allow},
		{first, catalogv1.EffectClass_EFFECT_CLASS_RESERVATION, 0, auto, Allow},
		{third, catalogv1.EffectClass_EFFECT_CLASS_WRITE, free, auto, ConfirmationRequired},
		{third, catalogv1.EffectClass_EFFECT_CLASS_DESTRUCTIVE, free, auto, ConfirmationRequired},
		{third, catalogv1.EffectClass_EFFECT_CLASS_RESERVATION, 0, auto, ConfirmationRequired},
		{third, catalogv1.EffectClass_EFFECT_CLASS_UNSPECIFIED, free, auto, ConfirmationRequired},
		{third, catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY, 0, auto, Allow},
		{third, catalogv1.EffectClass_EFFECT_CLASS_WRITE, free, user, Allow},
		{unset, catalogv1.EffectClass_EFFECT_CLASS_WRITE, free, auto, ConfirmationRequired},
		{unset, catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY, 0, auto, Allow},
	}
	for _, tc := range cases {
		f := clone(allowFacts())
		f.Review.Trust = tc.trust
		f.Review.Approved.Effect, f.Review.Approved.Confirmation = tc.effect, tc.conf
		f.Request.Mode = tc.mode
		if tc.mode == user {
			f.Confirmer = "gateway" // the mode is asserted by a confirmer
		}
		out := Decide(f)
		if out.Reason != tc.want {
			t.Errorf("%v/%v/%v/%v: %v (%s), want %v", tc.trust, tc.effect, tc.conf, tc.mode, out.Reason, out.Detail, tc.want)
		}
		if tc.want == ConfirmationRequired && !strings.Contains(out.Detail, "trusted") {
			t.Errorf("%v/%v: the detail %q does not name the trust level as the cause", tc.trust, tc.effect, out.Detail)
		}
	}
	// Its place in the order: an unversioned source answers first, then
	// invalid arguments (issue 25: never ask to confirm a call that would
	// be refused).
	f := clone(allowFacts())
	f.Review.Trust = third
	f.Review.Approved.Effect, f.Review.Approved.Confirmation = catalogv1.EffectClass_EFFECT_CLASS_WRITE, free
	f.Arguments = ArgumentCheck{Problem: "missing property", Pointer: "/id"}
	if got := Decide(f).Reason; got != ArgumentsInvalid {
		t.Errorf("third party with invalid arguments: %v, want ARGUMENTS_INVALID", got)
	}
	f.Pointer.Unversioned = true
	if got := Decide(f).Reason; got != UnversionedSource {
		t.Errorf("third party, unversioned: %v, want UNVERSIONED_SOURCE", got)
	}
}

// Only a confirmer asserts a confirmation: MODE_USER_CONFIRMED with no
// confirmer is FORBIDDEN (the detail naming the rule and why the header
// did not count), whatever the tool; with one, a WRITE tool that needs a
// confirmation is allowed. A shown digest goes only with that mode.
func TestUserConfirmedNeedsAConfirmer(t *testing.T) {
	write := func() Facts {
		f := clone(allowFacts())
		f.Review.Approved.Effect = catalogv1.EffectClass_EFFECT_CLASS_WRITE
		return f
	}
	f := write()
	if got := Decide(f); got.Reason != ConfirmationRequired {
		t.Fatalf("autonomous write: %v %q", got.Reason, got.Detail)
	}
	f.Request.Mode = admissionv1.Mode_MODE_USER_CONFIRMED
	if got := Decide(f); got.Reason != Forbidden || got.Detail != DetailNoConfirmer {
		t.Fatalf("user-confirmed write, no confirmer: %v %q", got.Reason, got.Detail)
	}
	f.ConfirmerProblem = "the confirmer token is not a confirmer's"
	if got := Decide(f); got.Reason != Forbidden || got.Detail != DetailNoConfirmer+": the confirmer token is not a confirmer's" {
		t.Fatalf("user-confirmed write, not a confirmer: %v %q", got.Reason, got.Detail)
	}
	// Decided before anything is looked up: even for a tool nobody sees.
	f.Reachable = false
	if got := Decide(f); got.Reason != Forbidden || !strings.HasPrefix(got.Detail, DetailNoConfirmer) {
		t.Fatalf("user-confirmed, unreachable, no confirmer: %v %q", got.Reason, got.Detail)
	}
	f = write()
	f.Request.Mode = admissionv1.Mode_MODE_USER_CONFIRMED
	f.Confirmer = "gateway"
	f.Request.ShownDigest = digest("d")
	if got := Decide(f); got.Reason != Allow {
		t.Fatalf("user-confirmed write with a confirmer: %v %q", got.Reason, got.Detail)
	}
	f.Request.ShownDigest = "sha256:short"
	if got := Decide(f); got.Reason != InvalidInput || got.Detail != "shown_digest: must be sha256:<64 lowercase hex>" {
		t.Fatalf("malformed shown digest: %v %q", got.Reason, got.Detail)
	}
	f = write()
	f.Request.ShownDigest = digest("d")
	if got := Decide(f); got.Reason != InvalidInput || got.Detail != "shown_digest: only with MODE_USER_CONFIRMED" {
		t.Fatalf("shown digest on an autonomous call: %v %q", got.Reason, got.Detail)
	}
}

package decision

import (
	"fmt"
	"strings"
	"testing"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// Runs of the base facts' (logistics, demo-a.readers) pair with their
// buckets, computed outside Go (Python's hashlib.sha256 over
// "logistics|demo-a.readers|<run>", first 8 bytes big-endian, mod 10,000).
const (
	runInside  = "run-8" // bucket 2490
	runOutside = "run-1" // bucket 7882
)

const (
	readOnly    = catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY
	write       = catalogv1.EffectClass_EFFECT_CLASS_WRITE
	destructive = catalogv1.EffectClass_EFFECT_CLASS_DESTRUCTIVE
)

// TestCanaryBucketIsTheDocumentedHash holds CanaryBucket to the formula in
// admission.proto against values computed by another implementation.
func TestCanaryBucketIsTheDocumentedHash(t *testing.T) {
	for _, tc := range []struct {
		server, class, run string
		want               int
	}{
		{"logistics", "demo-a.readers", "run-1", 7882},
		{"logistics", "demo-a.readers", "run-2", 9915},
		{"logistics", "demo-a.readers", "run-4", 6762},
		{"logistics", "demo-a.readers", "run-8", 2490},
		{"logistics", "demo-a.writers", "run-8", 3310}, // the class is in the draw
		{"billing", "demo-a.readers", "run-8", 2856},   // and the server
		{"logistics", "demo-a.readers", "", 1014},
	} {
		if got := CanaryBucket(tc.server, tc.class, tc.run); got != tc.want {
			t.Errorf("CanaryBucket(%q, %q, %q) = %d, want %d", tc.server, tc.class, tc.run, got, tc.want)
		}
	}
}

func TestRunOf(t *testing.T) {
	canary := func(p int32) *Rollout { return &Rollout{Stage: registryv1.Stage_STAGE_CANARY, Percent: p} }
	for _, tc := range []struct {
		ro   *Rollout
		run  string
		want CanaryRun
	}{
		{nil, runInside, NotCanary},
		{nil, "", NotCanary},
		{&Rollout{Stage: registryv1.Stage_STAGE_FULL}, "", NotCanary},
		{&Rollout{Stage: registryv1.Stage_STAGE_SHADOW}, runInside, NotCanary},
		{canary(5), "", RunMissing},
		{canary(100), "", RunMissing},
		{canary(50), runInside, RunInside},
		{canary(50), runOutside, RunOutside},
		{canary(25), runInside, RunInside},   // 2490 < 2500
		{canary(24), runInside, RunOutside},  // 2490 ≥ 2400
		{canary(79), runOutside, RunInside},  // 7882 < 7900
		{canary(78), runOutside, RunOutside}, // 7882 ≥ 7800
		{canary(0), runInside, RunOutside},
		{canary(100), runOutside, RunInside},
	} {
		if got := tc.ro.RunOf("logistics", "demo-a.readers", tc.run); got != tc.want {
			t.Errorf("%+v, run %q: %v, want %v", tc.ro, tc.run, got, tc.want)
		}
	}
}

// TestRolloutStages is the stage rule's table: SHADOW hides the server's
// generations (NOT_FOUND, detail saying shadow), an unknown stage fails
// closed as SHADOW, CANARY admits only runs in its share and only its
// effect classes (FORBIDDEN, detail "canary:"), FULL and a pair never set
// decide as before.
func TestRolloutStages(t *testing.T) {
	canary := func(p int32, es ...catalogv1.EffectClass) *Rollout {
		return &Rollout{Stage: registryv1.Stage_STAGE_CANARY, Percent: p, Effects: es}
	}
	const (
		auto = admissionv1.Mode_MODE_AUTONOMOUS
		user = admissionv1.Mode_MODE_USER_CONFIRMED
	)
	cases := []struct {
		name   string
		ro     *Rollout
		run    string
		effect catalogv1.EffectClass
		mode   admissionv1.Mode
		want   Reason
		tag    string
	}{
		{"never set", nil, "", readOnly, auto, Allow, ""},
		{"full", &Rollout{Stage: registryv1.Stage_STAGE_FULL}, "", readOnly, auto, Allow, ""},
		{"shadow", &Rollout{Stage: registryv1.Stage_STAGE_SHADOW}, runInside, readOnly, auto, NotFound, "in shadow"},
		{"unspecified stage fails closed", &Rollout{}, runInside, readOnly, auto, NotFound, "in shadow"},
		{"unknown stage fails closed", &Rollout{Stage: 9}, runInside, readOnly, auto, NotFound, "in shadow"},
		{"canary, run inside, read-only", canary(50, readOnly), runInside, readOnly, auto, Allow, ""},
		{"canary, run outside", canary(50, readOnly), runOutside, readOnly, auto, Forbidden, "outside the 50% canary"},
		{"canary, no run id", canary(100, readOnly), "", readOnly, auto, Forbidden, "no run_id"},
		{"canary, write tool not admitted", canary(100, readOnly), runInside, write, user, Forbidden, "effect classes READ_ONLY only; the tool is WRITE"},
		{"canary, no effect classes", canary(100), runInside, readOnly, auto, Forbidden, "(none)"},
		{"canary widened to writes, confirmed", canary(100, readOnly, write), runInside, write, user, Allow, ""},
		// The canary admits; the rules after it still decide.
		{"canary widened to writes, autonomous", canary(100, readOnly, write), runInside, write, auto, ConfirmationRequired, ""},
		// The canary denies before confirmation is asked for.
		{"canary, destructive not admitted, autonomous", canary(100, readOnly, write), runInside, destructive, auto, Forbidden, "canary:"},
		{"canary 0%", canary(0, readOnly), runInside, readOnly, auto, Forbidden, "outside the 0% canary"},
	}
	for _, tc := range cases {
		f := clone(allowFacts())
		f.Rollout = tc.ro
		f.Request.RunID = tc.run
		f.Request.Mode = tc.mode
		if tc.mode == user {
			f.Confirmer = "gateway" // the mode is asserted by a confirmer
		}
		f.Review.Approved.Effect = tc.effect
		o := Decide(f)
		if o.Reason != tc.want || !strings.Contains(o.Detail, tc.tag) {
			t.Errorf("%s: %v %q, want %v (%q)", tc.name, o.Reason, o.Detail, tc.want, tc.tag)
		}
		if tc.want == Forbidden && !strings.HasPrefix(o.Detail, "canary: ") {
			t.Errorf("%s: the detail %q does not start with \"canary: \"", tc.name, o.Detail)
		}
		// Admits (what ListVisibleTools filters by) agrees with the rule.
		admits := tc.ro.Admits("logistics", "demo-a.readers", tc.run, tc.effect)
		if denied := tc.want == NotFound || tc.want == Forbidden; admits == denied {
			t.Errorf("%s: Admits %v, but Decide says %v", tc.name, admits, o.Reason)
		}
	}
}

// TestShadowHidesEvenAMissingTool: in shadow, a tool id the generation
// does not list, a closed pointer and a pointer never proven all answer
// NOT_FOUND saying shadow: the pair's state is not served. A principal who
// cannot reach the server never learns that it is in shadow.
func TestShadowHidesEvenAMissingTool(t *testing.T) {
	shadow := &Rollout{Stage: registryv1.Stage_STAGE_SHADOW}
	for name, edit := range map[string]func(*Facts){
		"tool not listed":   func(f *Facts) { f.ActiveTool, f.PlanTool = nil, nil },
		"pointer closed":    func(f *Facts) { f.Pointer.Closed = true },
		"never proven":      func(f *Facts) { f.Pointer, f.ActiveTool, f.PlanTool = nil, nil, nil },
		"disabled":          func(f *Facts) { f.Review.Enabled = false },
		"past fresh_until":  func(f *Facts) { f.Pointer.FreshUntil = f.Now },
		"invalid arguments": func(f *Facts) { f.Arguments = ArgumentCheck{Problem: "bad"} },
	} {
		f := clone(allowFacts())
		f.Rollout = shadow
		edit(&f)
		if o := Decide(f); o.Reason != NotFound || !strings.Contains(o.Detail, "in shadow") {
			t.Errorf("%s: %v %q", name, o.Reason, o.Detail)
		}
	}
	f := clone(allowFacts())
	f.Rollout, f.Reachable = shadow, false
	if o := Decide(f); o.Reason != NotFound || strings.Contains(o.Detail, "shadow") {
		t.Errorf("unreachable server in shadow: %v %q, want NOT_FOUND without saying shadow", o.Reason, o.Detail)
	}
}

// TestCanaryShare: over 10,000 run ids a 5 % canary admits a share within
// the binomial bound (σ ≈ 0.22 %, so 3.5–6.5 % is about ±6.9σ) — the hash
// spreads runs, it does not merely exist.
func TestCanaryShare(t *testing.T) {
	ro := &Rollout{Stage: registryv1.Stage_STAGE_CANARY, Percent: 5, Effects: []catalogv1.EffectClass{readOnly}}
	in := 0
	for i := range 10_000 {
		if ro.RunOf("logistics", "demo-a.readers", fmt.Sprintf("run-%d", i)) == RunInside {
			in++
		}
	}
	if in < 350 || in > 650 {
		t.Fatalf("%d of 10,000 runs inside a 5%% canary", in)
	}
	t.Logf("%d of 10,000 runs inside a 5%% canary", in)
}

// TestCanaryDenialAfterThePlansEpoch: a canary denial the plan's epoch
// would not have given is POLICY_REVOKED (as for a scope), decided from
// the stage and grants at that epoch; FORBIDDEN when that epoch would have
// denied too, or when its policy is not known.
func TestCanaryDenialAfterThePlansEpoch(t *testing.T) {
	readOnlyCanary := func(p int32) *Rollout {
		return &Rollout{Stage: registryv1.Stage_STAGE_CANARY, Percent: p, Effects: []catalogv1.EffectClass{readOnly}}
	}
	granted := &Access{Scopes: []string{"shipment:read"}, Classes: []string{"demo-a.readers"}}
	cases := []struct {
		name    string
		planned *Access
		then    *Rollout
		run     string
		want    Reason
	}{
		{"full at the plan's epoch", granted, nil, runOutside, PolicyRevoked},
		{"a wider canary at the plan's epoch", granted, readOnlyCanary(90), runOutside, PolicyRevoked},
		{"the same canary at the plan's epoch", granted, readOnlyCanary(50), runOutside, Forbidden},
		{"shadow at the plan's epoch", granted, &Rollout{Stage: registryv1.Stage_STAGE_SHADOW}, runOutside, Forbidden},
		{"full then, but no scope then", &Access{Classes: []string{"demo-a.readers"}}, nil, runOutside, Forbidden},
		{"no policy at the plan's epoch", nil, nil, runOutside, Forbidden},
		{"full then, no run id now", granted, nil, "", PolicyRevoked},
		{"a canary then that needed a run id too", granted, readOnlyCanary(90), "", Forbidden},
	}
	for _, tc := range cases {
		f := clone(allowFacts())
		f.Rollout = readOnlyCanary(50)
		f.Planned, f.PlannedRollout = tc.planned, tc.then
		f.Request.RunID = tc.run
		o := Decide(f)
		if o.Reason != tc.want || !strings.HasPrefix(o.Detail, "canary: ") {
			t.Errorf("%s: %v %q, want %v with a canary detail", tc.name, o.Reason, o.Detail, tc.want)
		}
	}
}

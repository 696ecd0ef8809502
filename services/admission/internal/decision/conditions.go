package decision

import (
	"strings"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	"github.com/toolcrib/toolcrib/platform/condition"
)

// ConditionCheck is the outcome of the grants' conditions for one call
// ([Conditions]).
type ConditionCheck struct {
	// Admitting names the grant whose condition admitted the call; empty
	// when a grant without a condition gives the scope and class, and when
	// the conditions are unmet.
	Admitting string
	// Unmet names the first grant whose condition was false or failed when
	// no grant admits the call; empty otherwise. Failed says it failed
	// (evaluation error: fail closed).
	Unmet  string
	Failed bool
}

// Conditions decides the grants' conditions of one call (issue 25) by
// the one rule, [condition.Admit], over the grants naming the principal.
//
// It is only asked after [Prelim] admitted the call with every grant
// counted, so an unmet answer names a grant whose condition was false or
// failed.
func Conditions(grants []Grant, subject string, groups []string, scope, class string, in *condition.Input) ConditionCheck {
	cands := make([]condition.Candidate, 0, 4)
	for _, g := range grants {
		if g.Names(subject, groups) {
			cands = append(cands, g.Candidate())
		}
	}
	r := condition.Admit(cands, scope, class, in, nil)
	if r.Admitted {
		return ConditionCheck{Admitting: r.Admitting}
	}
	if r.Unmet == "" {
		// Not reachable after Prelim (every grant counted gave scope and
		// class); fail closed naming no values.
		return ConditionCheck{Unmet: "(none)", Failed: true}
	}
	return ConditionCheck{Unmet: r.Unmet, Failed: r.Failed}
}

// Candidate is g as [condition.Admit] reads it.
func (g Grant) Candidate() condition.Candidate {
	return condition.Candidate{Name: g.Name(), Scopes: g.Scopes, Classes: g.Classes, Text: g.ConditionText, Expr: g.Condition}
}

// OnlyConditional reports whether the principal's grants give scope on
// class only through grants with a condition: a listed tool is then marked
// conditional (the condition may read arguments a listing cannot know).
func OnlyConditional(grants []Grant, subject string, groups []string, scope, class string) bool {
	return Effective(Unconditional(grants), subject, groups).Conditional(scope, class)
}

// Conditional reports, for plain the access the principal's grants without
// a condition give, whether scope on class comes only from grants with one
// (the rule of [OnlyConditional], for a caller that computed plain once
// for many tools).
func (plain Access) Conditional(scope, class string) bool {
	return !plain.HasScope(scope) || !plain.HasClass(class)
}

// ModeName is the request mode as a condition reads it
// (`request.mode`): AUTONOMOUS or USER_CONFIRMED.
func ModeName(m admissionv1.Mode) string { return strings.TrimPrefix(m.String(), "MODE_") }

// EffectName is the effect class as a condition reads it (`tool.effect`):
// READ_ONLY, RESERVATION, WRITE, DESTRUCTIVE or UNSPECIFIED.
var EffectName = effectName

// GrantOf builds a grant, compiling its condition once (parse once: the
// policy is loaded once per epoch). A condition that does not compile here
// is kept as text with no program, and never holds.
func GrantOf(subject, group string, scopes, classes []string, cond string) Grant {
	g := Grant{Subject: subject, Group: group, Scopes: scopes, Classes: classes, ConditionText: cond}
	if cond != "" {
		if x, err := condition.Compile(cond); err == nil {
			g.Condition = x
		}
	}
	return g
}

// Unconditional returns the grants without a condition.
func Unconditional(grants []Grant) []Grant {
	var out []Grant
	for _, g := range grants {
		if !g.Conditional() {
			out = append(out, g)
		}
	}
	return out
}

package condition

import "slices"

// Candidate is one grant naming the caller, as [Admit] reads it.
type Candidate struct {
	// Name names the grant: `subject:<sub>` or `group:<group>`.
	Name            string
	Scopes, Classes []string
	// Text is the condition as stored (empty: none); Expr is it compiled,
	// nil when it does not compile here (then it never holds).
	Text string
	Expr *Expr
}

// Verdict is what one condition gave, for `toolcrib policy test`.
type Verdict int

// The verdicts of one grant.
const (
	// NotNeeded: the grant has no condition, or it was not evaluated
	// because grants without one already admit the call.
	NotNeeded Verdict = iota
	// Irrelevant: the grant gives neither the scope nor the class.
	Irrelevant
	Holds
	Unmet
	Failed
)

// Result is [Admit]'s answer.
type Result struct {
	// Admitted is true when the grants that count give scope and class.
	Admitted bool
	// Admitting names the conditional grant whose condition completed the
	// admission; empty when grants without a condition admit the call.
	Admitting string
	// Unmet names the first relevant grant whose condition was false or
	// failed (Failed) when the call is not admitted.
	Unmet  string
	Failed bool
}

// Admit is the one rule of conditions (issue 25): of the grants naming the
// caller, one counts when it has no condition or its condition is true
// for in; the call is admitted when the grants that count give scope and
// class (a union, as grants combine without conditions). Grants without a
// condition are tried first, so a call they admit evaluates nothing; then
// each conditional grant that gives the scope or the class, in order,
// until the union admits the call. trace, when not nil, is told each
// grant's verdict.
func Admit(cands []Candidate, scope, class string, in *Input, trace func(Candidate, Verdict)) Result {
	var hasScope, hasClass bool
	add := func(c Candidate) {
		hasScope = hasScope || slices.Contains(c.Scopes, scope)
		hasClass = hasClass || slices.Contains(c.Classes, class)
	}
	for _, c := range cands {
		if c.Text == "" {
			add(c)
		}
	}
	var out Result
	for _, c := range cands {
		if c.Text == "" {
			if trace != nil {
				trace(c, NotNeeded)
			}
			continue
		}
		if hasScope && hasClass {
			if trace != nil {
				trace(c, NotNeeded)
			}
			continue
		}
		if !slices.Contains(c.Scopes, scope) && !slices.Contains(c.Classes, class) {
			if trace != nil {
				trace(c, Irrelevant)
			}
			continue
		}
		v := Failed
		if c.Expr != nil && in != nil {
			if ok, err := c.Expr.Eval(in); err == nil {
				v = Unmet
				if ok {
					v = Holds
				}
			}
		}
		if trace != nil {
			trace(c, v)
		}
		if v != Holds {
			if out.Unmet == "" {
				out.Unmet, out.Failed = c.Name, v == Failed
			}
			continue
		}
		add(c)
		if hasScope && hasClass && out.Admitting == "" && !out.Admitted {
			out.Admitting = c.Name
			out.Admitted = true
		}
	}
	if hasScope && hasClass {
		out.Admitted = true
		out.Unmet, out.Failed = "", false
	}
	return out
}

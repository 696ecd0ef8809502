package condition

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/checker"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"
)

// Limits of a condition.
const (
	// MaxBytes is the longest condition text.
	MaxBytes = 4096
	// CostBudget bounds the cost CEL estimates for the worst case when the
	// condition is written (CEL cost units: roughly one per operation, plus
	// one per 10 bytes a string function reads), with every size bounded
	// by the arguments cap.
	CostBudget = 1_000_000
	// EvalTimeout bounds one evaluation of a condition whose estimate
	// allows more than guardedCost (a comprehension over the arguments);
	// past it the evaluation is interrupted and fails closed. CEL's own
	// runtime cost tracking is not used: in cel-go v0.32 it makes a
	// comprehension quadratic in the list's length (16,000 elements: 0.5 s
	// against 3.5 ms untracked), which a caller choosing the arguments
	// could use to slow every Check.
	EvalTimeout = 50 * time.Millisecond
	// guardedCost is the estimated cost above which an evaluation runs
	// under EvalTimeout: a comprehension over a list of the arguments'
	// size. Below it (comparisons, string functions, `in` over a list: at
	// most linear in the arguments, which their caps bound) it needs no
	// timer.
	guardedCost = 100_000
	// maxValueSize is the size the cost estimate assumes for a string, list
	// or map whose size is not known when the condition is written: the
	// arguments size cap (64 KiB) bounds every one of them.
	maxValueSize = 64 << 10
	// maxMessageBytes bounds the text of an error returned to a caller.
	maxMessageBytes = 160
)

// The variables a condition may read, each a qualified name (`principal`
// alone is not a variable, so `principal.subjec` is an unknown reference).
const (
	VarSubject        = "principal.subject"
	VarTenant         = "principal.tenant"
	VarGroups         = "principal.groups"
	VarClaims         = "principal.claims"
	VarToolID         = "tool.id"
	VarToolServer     = "tool.server"
	VarToolEffect     = "tool.effect"
	VarToolScopes     = "tool.scopes"
	VarApprovalDigest = "tool.approval_digest"
	VarArgs           = "args"
	VarMode           = "request.mode"
	VarRunID          = "request.run_id"
	VarTime           = "request.time"
)

// Problems of a condition that does not compile; constants, so a caller can
// assert them. The [Error] beside names the position.
const (
	ProblemTooLong = "longer than 4096 bytes"
	ProblemNotUTF8 = "not valid UTF-8"
	ProblemNotBool = "must return a bool"
	ProblemCost    = "estimated cost exceeds the condition cost budget"
)

// Error is a condition that cannot be used: where (1-based line and
// column; 0 when the whole text is at fault) and what, bounded.
type Error struct {
	Line, Column int
	Message      string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return e.Message
	}
	return fmt.Sprintf("%d:%d: %s", e.Line, e.Column, e.Message)
}

var env = mustEnv()

func mustEnv() *cel.Env {
	e, err := cel.NewEnv(
		cel.Variable(VarSubject, cel.StringType),
		cel.Variable(VarTenant, cel.StringType),
		cel.Variable(VarGroups, cel.ListType(cel.StringType)),
		cel.Variable(VarClaims, cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable(VarToolID, cel.StringType),
		cel.Variable(VarToolServer, cel.StringType),
		cel.Variable(VarToolEffect, cel.StringType),
		cel.Variable(VarToolScopes, cel.ListType(cel.StringType)),
		cel.Variable(VarApprovalDigest, cel.StringType),
		cel.Variable(VarArgs, cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable(VarMode, cel.StringType),
		cel.Variable(VarRunID, cel.StringType),
		cel.Variable(VarTime, cel.TimestampType),
	)
	if err != nil {
		panic(err)
	}
	return e
}

// Expr is a compiled condition, safe for concurrent use.
type Expr struct {
	src string
	prg cel.Program
	// guarded: evaluate under EvalTimeout.
	guarded bool
}

// Source returns the condition's text.
func (x *Expr) Source() string { return x.src }

// Compile parses, type-checks and cost-estimates src. The [Error] gives the
// position of the first problem: a syntax error, a reference to an
// unknown variable or field, a result that is not a bool, or an estimated
// cost over [CostBudget].
func Compile(src string) (*Expr, *Error) {
	if len(src) > MaxBytes {
		return nil, &Error{Message: ProblemTooLong}
	}
	if !utf8.ValidString(src) {
		return nil, &Error{Message: ProblemNotUTF8}
	}
	ast, iss := env.Compile(src)
	if iss != nil && iss.Err() != nil {
		errs := iss.Errors()
		if len(errs) == 0 {
			return nil, &Error{Line: 1, Column: 1, Message: "does not compile"}
		}
		e := errs[0]
		return nil, &Error{Line: max(e.Location.Line(), 1), Column: e.Location.Column() + 1, Message: bound(e.Message)}
	}
	if ast.OutputType() != cel.BoolType {
		return nil, &Error{Line: 1, Column: 1, Message: ProblemNotBool}
	}
	est, err := env.EstimateCost(ast, estimator{})
	if err != nil || est.Max > CostBudget {
		return nil, &Error{Line: 1, Column: 1, Message: ProblemCost}
	}
	prg, err := env.Program(ast, cel.InterruptCheckFrequency(64), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, &Error{Line: 1, Column: 1, Message: bound(err.Error())}
	}
	return &Expr{src: src, prg: prg, guarded: est.Max > guardedCost}, nil
}

// estimator bounds every size CEL cannot know when the condition is
// written by [maxValueSize], so the estimate is finite and a nested
// comprehension over the arguments is refused by its cost.
type estimator struct{}

func (estimator) EstimateSize(checker.AstNode) *checker.SizeEstimate {
	return &checker.SizeEstimate{Min: 0, Max: maxValueSize}
}

func (estimator) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// Principal is the verified caller, as a condition reads it.
type Principal struct {
	Subject, Tenant string
	Groups          []string
	// Claims are the token claims the operator allow-listed (string
	// values only); nil reads as an empty map.
	Claims map[string]string
}

// Tool is the tool being called, from the approved contract.
type Tool struct {
	ID, Server string
	// Effect is the effect class without its prefix: READ_ONLY,
	// RESERVATION, WRITE, DESTRUCTIVE or UNSPECIFIED.
	Effect         string
	Scopes         []string
	ApprovalDigest string
}

// Request is the call's request.
type Request struct {
	// Mode is AUTONOMOUS or USER_CONFIRMED.
	Mode  string
	RunID string
	Time  time.Time
}

// Input is everything a condition reads.
type Input struct {
	Principal Principal
	Tool      Tool
	// Args are the validated arguments as decoded (numbers as json.Number
	// or float64); nil reads as an empty map.
	Args    map[string]any
	Request Request
}

// activation resolves the variables straight from an Input, with no map
// built per call; args is converted once, when first read.
type activation struct {
	in   *Input
	args map[string]any
}

func (a *activation) ResolveName(name string) (any, bool) {
	in := a.in
	switch name {
	case VarSubject:
		return in.Principal.Subject, true
	case VarTenant:
		return in.Principal.Tenant, true
	case VarGroups:
		return nonNil(in.Principal.Groups), true
	case VarClaims:
		if in.Principal.Claims == nil {
			return map[string]string{}, true
		}
		return in.Principal.Claims, true
	case VarToolID:
		return in.Tool.ID, true
	case VarToolServer:
		return in.Tool.Server, true
	case VarToolEffect:
		return in.Tool.Effect, true
	case VarToolScopes:
		return nonNil(in.Tool.Scopes), true
	case VarApprovalDigest:
		return in.Tool.ApprovalDigest, true
	case VarArgs:
		if a.args == nil {
			a.args = Native(in.Args)
		}
		return a.args, true
	case VarMode:
		return in.Request.Mode, true
	case VarRunID:
		return in.Request.RunID, true
	case VarTime:
		return in.Request.Time.UTC(), true
	}
	return nil, false
}

func (*activation) Parent() interpreter.Activation { return nil }

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Eval problems; constants, bounded, never the values read.
var (
	// ErrEval is an evaluation that failed: a missing argument key, a type
	// mismatch at run time, [EvalTimeout]. The caller fails closed.
	ErrEval = errors.New("the condition could not be evaluated")
	// ErrNotBool is a result that is not a bool (cannot happen for an
	// expression [Compile] accepted; kept as a guard).
	ErrNotBool = errors.New("the condition did not return a bool")
)

// Eval evaluates x on in. An error is [ErrEval] or [ErrNotBool], wrapping
// nothing that could carry the inputs.
func (x *Expr) Eval(in *Input) (bool, error) {
	var (
		out ref.Val
		err error
	)
	if x.guarded {
		ctx, cancel := context.WithTimeout(context.Background(), EvalTimeout)
		out, _, err = x.prg.ContextEval(ctx, &activation{in: in})
		cancel()
	} else {
		out, _, err = x.prg.Eval(&activation{in: in})
	}
	if err != nil {
		return false, ErrEval
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, ErrNotBool
	}
	return bool(b), nil
}

// Native converts decoded JSON (json.Number numbers) into values CEL
// reads: integral numbers as int64, others as float64.
func Native(v map[string]any) map[string]any {
	if v == nil {
		return map[string]any{}
	}
	out := make(map[string]any, len(v))
	for k, e := range v {
		out[k] = native(e)
	}
	return out
}

func native(v any) any {
	switch t := v.(type) {
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i
		}
		if f, err := t.Float64(); err == nil {
			return f
		}
		return string(t)
	case map[string]any:
		return Native(t)
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = native(e)
		}
		return out
	}
	return v
}

// bound cuts s to maxMessageBytes on a rune boundary.
func bound(s string) string {
	if len(s) <= maxMessageBytes {
		return s
	}
	i := maxMessageBytes
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

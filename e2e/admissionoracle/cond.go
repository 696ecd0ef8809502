package admissionoracle

import (
	"encoding/json"
	"slices"
	"strconv"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
)

// CondKind is a kind of condition of the family the oracle models.
type CondKind int

// The kinds. Each has a CEL text ([Cond.CEL]) the service is given and a
// meaning here ([Cond.Holds]) written from CEL's semantics, not from the
// service's code: a missing key or a value of another type is an error in
// CEL, and an error never holds (fail closed).
const (
	// CondNone: no condition.
	CondNone CondKind = iota
	// CondRun: `request.run_id != ""` — the request names a run.
	CondRun
	// CondUnitsAtMost: `args.units <= N` — the `units` argument is a
	// number (integer or not) at most N; missing or not a number: error.
	CondUnitsAtMost
	// CondGroup: `"G" in principal.groups`.
	CondGroup
	// CondSubject: `principal.subject == "S"`.
	CondSubject
	// CondReadOnly: `tool.effect == "READ_ONLY"` (the approved contract's
	// effect).
	CondReadOnly
	// CondFalse: `false`.
	CondFalse
)

// Cond is one condition of the family.
type Cond struct {
	Kind CondKind
	// N is CondUnitsAtMost's bound; Name is CondGroup's group or
	// CondSubject's subject.
	N    int
	Name string
}

// CEL is the condition's text for the service ("" for none).
func (c Cond) CEL() string {
	switch c.Kind {
	case CondRun:
		return `request.run_id != ""`
	case CondUnitsAtMost:
		return "args.units <= " + strconv.Itoa(c.N)
	case CondGroup:
		return strconv.Quote(c.Name) + " in principal.groups"
	case CondSubject:
		return "principal.subject == " + strconv.Quote(c.Name)
	case CondReadOnly:
		return `tool.effect == "READ_ONLY"`
	case CondFalse:
		return "false"
	}
	return ""
}

// Holds reports whether the grant counts for r with its decoded arguments
// (numbers as json.Number) under contract.
func (c Cond) Holds(r Request, args map[string]any, contract Contract) bool {
	switch c.Kind {
	case CondNone:
		return true
	case CondRun:
		return r.RunID != ""
	case CondUnitsAtMost:
		n, ok := args["units"].(json.Number)
		if !ok {
			return false
		}
		f, err := strconv.ParseFloat(string(n), 64)
		return err == nil && f <= float64(c.N)
	case CondGroup:
		return slices.Contains(r.Groups, c.Name)
	case CondSubject:
		return r.Subject == c.Name
	case CondReadOnly:
		return contract.Effect == catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY
	}
	return false
}

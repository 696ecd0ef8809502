package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolcrib/toolcrib/platform/schema"
)

// Refusal reasons (in an error result's text and `_meta`).
const (
	// ReasonMissingEvidence: a required-evidence field is absent.
	ReasonMissingEvidence = "MISSING_EVIDENCE"
	// ReasonOutputInvalid: the projected result does not validate against
	// the tool's output schema, or a tool with an output schema returned no
	// structured content.
	ReasonOutputInvalid = "OUTPUT_SCHEMA_INVALID"
	// ReasonNotObject: structured content that must be projected (or
	// checked for evidence) is not a JSON object.
	ReasonNotObject = "STRUCTURED_CONTENT_NOT_OBJECT"
)

// Refusal is a result the policy does not let through.
type Refusal struct {
	// Reason is one of the Reason constants.
	Reason string
	// Detail names the field or the violation (bounded; never the value).
	Detail string
}

func (r *Refusal) Error() string { return r.Reason + ": " + r.Detail }

// Rules are one contract's result policy.
type Rules struct {
	// AllowedFields are the top-level fields of structured content passed
	// on; empty passes every field (the contract restricts nothing).
	AllowedFields []string
	// RequiredEvidence are the fields a result must carry; each is one of
	// AllowedFields when those are set (the registry checks this).
	RequiredEvidence []string
	// Output is the compiled output schema; nil when the tool has none.
	Output *jsonschema.Schema
}

// Outcome is what a result becomes.
type Outcome struct {
	// Structured is the projected structured content (JSON); nil when the
	// result had none.
	Structured json.RawMessage
	// Dropped are the fields the projection removed, sorted.
	Dropped []string
}

// Apply runs the policy on a successful result's structured content (nil
// when the result had none).
func (r Rules) Apply(structured json.RawMessage) (Outcome, *Refusal) {
	if len(bytes.TrimSpace(structured)) == 0 || string(bytes.TrimSpace(structured)) == "null" {
		if len(r.RequiredEvidence) > 0 {
			return Outcome{}, &Refusal{Reason: ReasonMissingEvidence,
				Detail: "the result has no structured content; required evidence: " + strings.Join(r.RequiredEvidence, ", ")}
		}
		if r.Output != nil {
			return Outcome{}, &Refusal{Reason: ReasonOutputInvalid, Detail: "the tool declares an output schema but returned no structured content"}
		}
		return Outcome{}, nil
	}
	if len(r.AllowedFields) == 0 && len(r.RequiredEvidence) == 0 {
		return Outcome{Structured: structured}, r.validate(structured)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(structured, &obj); err != nil || obj == nil {
		return Outcome{}, &Refusal{Reason: ReasonNotObject, Detail: "structured content must be a JSON object to apply allowed fields and required evidence"}
	}
	var out Outcome
	if len(r.AllowedFields) > 0 {
		for k := range obj {
			if !slices.Contains(r.AllowedFields, k) {
				delete(obj, k)
				out.Dropped = append(out.Dropped, k)
			}
		}
		slices.Sort(out.Dropped)
	}
	var missing []string
	for _, f := range r.RequiredEvidence {
		if v, ok := obj[f]; !ok || string(bytes.TrimSpace(v)) == "null" {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return Outcome{}, &Refusal{Reason: ReasonMissingEvidence, Detail: "the result lacks required evidence: " + strings.Join(missing, ", ")}
	}
	if len(out.Dropped) == 0 {
		out.Structured = structured
	} else {
		b, err := json.Marshal(obj)
		if err != nil {
			return Outcome{}, &Refusal{Reason: ReasonNotObject, Detail: "structured content cannot be re-encoded"}
		}
		out.Structured = b
	}
	return out, r.validate(out.Structured)
}

func (r Rules) validate(structured json.RawMessage) *Refusal {
	if r.Output == nil {
		return nil
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(structured))
	if err != nil {
		return &Refusal{Reason: ReasonOutputInvalid, Detail: "structured content is not JSON"}
	}
	if err := r.Output.Validate(v); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			leaf := leafOf(ve)
			return &Refusal{Reason: ReasonOutputInvalid, Detail: bound(fmt.Sprintf("at %s: %s", pointer(leaf.InstanceLocation), leaf.ErrorKind))}
		}
		return &Refusal{Reason: ReasonOutputInvalid, Detail: "validation failed"}
	}
	return nil
}

func leafOf(e *jsonschema.ValidationError) *jsonschema.ValidationError {
	for len(e.Causes) > 0 {
		e = e.Causes[0]
	}
	return e
}

func pointer(loc []string) string {
	if len(loc) == 0 {
		return "/"
	}
	return "/" + strings.Join(loc, "/")
}

const maxDetail = 256

func bound(s string) string {
	if len(s) <= maxDetail {
		return s
	}
	return s[:maxDetail] + "…"
}

// outputCompiler compiles output schemas (platform/schema: the dialect
// allow-list and the refusing loader).
var outputCompiler schema.Compiler

// CompileOutput compiles an output schema (JSON Schema 2020-12 unless it
// names draft-07; any other dialect is refused) without fetching anything
// ([schema.ErrLoadRefused]).
func CompileOutput(raw json.RawMessage) (*jsonschema.Schema, error) {
	sch, err := outputCompiler.Compile(raw)
	if err != nil {
		return nil, fmt.Errorf("policy: output schema: %w", err)
	}
	return sch, nil
}

// Budget is the size limit of one contract's results.
type Budget struct {
	// Bytes is the largest result (bytes of its JSON) given to the model
	// inline; a larger one becomes an artifact.
	Bytes int
	// PreviewBytes bounds the head and the tail of an artifact's preview;
	// at most Bytes/2, so a preview is never over the budget.
	PreviewBytes int
}

// BudgetFor returns the budget of a contract whose result_budget_bytes is
// contractBytes: that many bytes when it is above 0, else defaultBytes
// (the gateway's `--result-budget-bytes`). The preview is previewBytes,
// lowered to half the budget when the contract's budget is smaller.
func BudgetFor(contractBytes int64, defaultBytes, previewBytes int) Budget {
	b := Budget{Bytes: defaultBytes, PreviewBytes: previewBytes}
	if contractBytes > 0 {
		b.Bytes = int(contractBytes)
	}
	b.PreviewBytes = min(b.PreviewBytes, b.Bytes/2)
	return b
}

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
	// ReasonNotStructured: the contract sets allowed fields and the result
	// has no structured content, so nothing in it can be shown to be
	// allowed.
	ReasonNotStructured = "RESULT_NOT_STRUCTURED"
	// ReasonUpstreamError: the tool answered an error result and the
	// contract sets allowed fields; its text is withheld and only its
	// error code is named.
	ReasonUpstreamError = "UPSTREAM_ERROR"
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

// Restricts reports whether the contract names the fields a result may
// carry (AllowedFields): then every result must be structured, and an
// error result's text is never passed on.
func (r Rules) Restricts() bool { return len(r.AllowedFields) > 0 }

// Apply runs the policy on a successful result's structured content (nil
// when the result had none). Without structured content the result is
// refused RESULT_NOT_STRUCTURED when the rules restrict fields (its text
// could carry anything), else MISSING_EVIDENCE when evidence is required,
// else OUTPUT_SCHEMA_INVALID when the tool declares an output schema.
func (r Rules) Apply(structured json.RawMessage) (Outcome, *Refusal) {
	if len(bytes.TrimSpace(structured)) == 0 || string(bytes.TrimSpace(structured)) == "null" {
		if r.Restricts() {
			return Outcome{}, &Refusal{Reason: ReasonNotStructured,
				Detail: "the result has no structured content, and its contract passes on only the fields " + bound(strings.Join(r.AllowedFields, ", "))}
		}
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

// UpstreamError is what an upstream's error result becomes: nil when the
// rules restrict nothing (the error passes on, bounded like any result);
// else a refusal naming only the upstream's error code (see [ErrorCode]),
// its text and content withheld.
func (r Rules) UpstreamError(code string) *Refusal {
	if !r.Restricts() {
		return nil
	}
	d := "the tool reported an error without an error code"
	if code != "" {
		d = "the tool reported an error (upstream error code " + code + ")"
	}
	return &Refusal{Reason: ReasonUpstreamError, Detail: d + "; its text is withheld, as the tool's contract passes on only its named fields"}
}

// maxCode bounds an upstream error code.
const maxCode = 64

// ErrorCode is the upstream's error code of an error result: the
// executor kit's failure name (failure, from `_meta`), else the structured
// content's top-level `code` (a string or an integer). Only a short token
// counts (at most 64 of `A-Za-z0-9_.:-`, an integer as its digits); ""
// when the result names none, so no free text passes as a code.
func ErrorCode(failure any, structured json.RawMessage) string {
	if f, ok := failure.(string); ok && isCode(f) {
		return f
	}
	var obj struct {
		Code json.RawMessage `json:"code"`
	}
	if len(structured) == 0 || json.Unmarshal(structured, &obj) != nil || len(obj.Code) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(obj.Code, &s) == nil && isCode(s) {
		return s
	}
	var n json.Number
	d := json.NewDecoder(bytes.NewReader(obj.Code))
	d.UseNumber()
	if d.Decode(&n) == nil {
		if _, err := n.Int64(); err == nil && isCode(n.String()) {
			return n.String()
		}
	}
	return ""
}

func isCode(s string) bool {
	if s == "" || len(s) > maxCode {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-') {
			return false
		}
	}
	return true
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

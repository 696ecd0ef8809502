package policy

import (
	"encoding/json"
	"slices"
	"testing"
)

// FuzzApply: for any upstream structured content, Apply never panics, a
// passed result carries only allowed fields and every required-evidence
// field, and a refusal names a known reason.
func FuzzApply(f *testing.F) {
	for _, s := range []string{`{"shipment_id":"S-1","status":"x","internal_cost":1}`, `{"updated_at":null}`, `[1]`, `"x"`, `null`, ``,
		`{"shipment_id":{"nested":[1,2,{"a":null}]}}`, `{"a":1,"a":2}`} {
		f.Add([]byte(s))
	}
	rules := Rules{AllowedFields: []string{"shipment_id", "status", "updated_at"}, RequiredEvidence: []string{"shipment_id"}}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, r := rules.Apply(in)
		if r != nil {
			if r.Reason != ReasonMissingEvidence && r.Reason != ReasonNotObject && r.Reason != ReasonOutputInvalid && r.Reason != ReasonNotStructured {
				t.Fatalf("unknown reason %q", r.Reason)
			}
			return
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(out.Structured, &obj); err != nil {
			t.Fatalf("passed %q, not an object: %v", out.Structured, err)
		}
		for k := range obj {
			if !slices.Contains(rules.AllowedFields, k) {
				t.Fatalf("passed field %q", k)
			}
		}
		if _, ok := obj["shipment_id"]; !ok {
			t.Fatalf("passed without evidence: %s", out.Structured)
		}
	})
}

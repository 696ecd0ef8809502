package policy

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/toolcrib/toolcrib/platform/schema"
)

// TestCompileOutputUsesTheAllowList: output schemas are compiled as
// discovery and admission compile theirs (platform/schema): a dialect
// outside 2020-12 and draft-07 is refused (the gateway once compiled it
// under whatever the library would load), a reference outside the document
// is refused without a fetch, draft-07 is honoured.
func TestCompileOutputUsesTheAllowList(t *testing.T) {
	if _, err := CompileOutput(json.RawMessage(`{"$schema":"https://json-schema.org/draft/2019-09/schema","type":"object"}`)); !errors.Is(err, schema.ErrUnknownDialect) {
		t.Errorf("2019-09: %v, want ErrUnknownDialect", err)
	}
	if _, err := CompileOutput(json.RawMessage(`{"properties":{"a":{"$ref":"https://example.invalid/s.json"}}}`)); !errors.Is(err, schema.ErrLoadRefused) {
		t.Errorf("remote ref: %v, want ErrLoadRefused", err)
	}
	sch, err := CompileOutput(json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"array","prefixItems":[{"type":"integer"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate([]any{"x"}); err != nil {
		t.Errorf("draft-07 applied prefixItems: %v", err)
	}
}

package oracle_test

import (
	"testing"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	"github.com/toolcrib/toolcrib/e2e/oracle"
)

// FuzzValidation feeds arbitrary tool JSON, as a server could serve it, to
// the oracle's validation: it must never panic, and a catalog it activates
// must carry a digest for every tool.
func FuzzValidation(f *testing.F) {
	for _, seed := range []string{
		`{"name":"a","inputSchema":{"type":"object"}}`,
		`{"name":"a","inputSchema":{"type":"object","properties":{"x":{"$ref":"#/properties/x"}}}}`,
		`{"name":"a","inputSchema":{"type":"object","$defs":{"a":{"$anchor":"z"}},"properties":{"x":{"$ref":"#z"}}}}`,
		`{"name":"a","inputSchema":{"type":"object","properties":{"x":{"$ref":"#/%7e0/~2"}}}}`,
		`{"name":"a","inputSchema":{"$schema":7,"type":"object"},"icons":[{"src":"data:x"}]}`,
		`{"name":"a","inputSchema":{"type":"object"},"outputSchema":null}`,
		`{"name":"a","name":"b"}`,
		`[1,2]`,
		`"x"`,
		`{"name":"a","inputSchema":{"type":"object","properties":{"x":{"$ref":"#/items/99999999999999999999"}}}}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		tool, err := fixture.RawTool([]byte(raw))
		if err != nil {
			return
		}
		events := []fixture.Event{
			{Seq: 1, Kind: fixture.EventRequest, Request: 1},
			{Seq: 2, Kind: fixture.EventPage, Request: 1, State: 1, Tools: []fixture.Tool{tool}},
		}
		out, err := oracle.Expect(events, oracle.Config{RevisionSource: noRevision, Limits: oracle.Limits{MaxSchemaDepth: 8, MaxSchemaBytes: 1000}})
		if err != nil {
			t.Fatalf("Expect: %v", err)
		}
		for _, tl := range out.Tools {
			if tl.DescriptorDigest == "" {
				t.Fatalf("activated tool %q without a digest", tl.Name)
			}
		}
	})
}

package oracle_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	"github.com/toolcrib/toolcrib/e2e/oracle"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/canonical"
)

const (
	proven      = catalogv1.DiscoveryState_DISCOVERY_STATE_SNAPSHOT_PROVEN
	unversioned = catalogv1.DiscoveryState_DISCOVERY_STATE_UNVERSIONED_OBSERVATION
	incomplete  = catalogv1.DiscoveryState_DISCOVERY_STATE_INCOMPLETE
	quarantined = catalogv1.DiscoveryState_DISCOVERY_STATE_QUARANTINED

	serverProvided = registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED
	noRevision     = registryv1.RevisionSource_REVISION_SOURCE_NONE

	none = discoveryv1.RunReason_RUN_REASON_UNSPECIFIED
)

func named(names ...string) []fixture.Tool {
	out := make([]fixture.Tool, len(names))
	for i, n := range names {
		out[i] = fixture.NewTool(n, "does "+n)
	}
	return out
}

// seven is the catalog most scenarios use: with page size 3 it is pages
// [a b c] [d e f] [g], so request 4 is the closing re-check.
var seven = []string{"a", "b", "c", "d", "e", "f", "g"}

func step(request int, f func(*fixture.Step)) fixture.Step {
	s := fixture.Step{Request: request}
	f(&s)
	return s
}

func mutate(request int, muts ...fixture.Mutation) fixture.Step {
	return fixture.Step{Request: request, Mutate: muts}
}

type scenario struct {
	name    string
	script  fixture.Script
	source  registryv1.RevisionSource // SERVER_PROVIDED when unset and the script is versioned, else NONE
	limits  oracle.Limits
	state   catalogv1.DiscoveryState
	reason  discoveryv1.RunReason
	tools   []string // names of the activated catalog, for activating outcomes
	partial bool     // the activated catalog is not the whole catalog
}

func (sc scenario) config() oracle.Config {
	src := sc.source
	if src == registryv1.RevisionSource_REVISION_SOURCE_UNSPECIFIED {
		src = noRevision
		if sc.script.Versioned {
			src = serverProvided
		}
	}
	return oracle.Config{RevisionSource: src, Limits: sc.limits}
}

func versioned(steps ...fixture.Step) fixture.Script {
	return fixture.Script{Versioned: true, PageSize: 3, Tools: named(seven...), Steps: steps}
}

func withTools(sc fixture.Script, tools ...fixture.Tool) fixture.Script {
	sc.Tools = tools
	return sc
}

func scenarios() []scenario {
	dup := fixture.DuplicateTools("dup")
	return []scenario{
		// Completeness.
		{name: "nothing happens: every page and the re-check carry r-1, so the 7 tools are proven",
			script: versioned(), state: proven, tools: seven},
		{name: "an unversioned server is only ever an observation",
			script: fixture.Script{PageSize: 3, Tools: named(seven...)}, state: unversioned, tools: seven},
		{name: "registered without revision, the revisions a server sends are ignored",
			script: versioned(), source: noRevision, state: unversioned, tools: seven},
		{name: "registered with revision, a server that sends none is missing it on page 1",
			script: fixture.Script{PageSize: 3, Tools: named(seven...)}, source: serverProvided,
			state: incomplete, reason: discoveryv1.RunReason_RUN_REASON_REVISION_MISSING},
		{name: "list_changed after page 2 arrives before page 3",
			script: versioned(step(3, func(s *fixture.Step) { s.Notify = true })),
			state:  incomplete, reason: discoveryv1.RunReason_RUN_REASON_LIST_CHANGED},
		{name: "list_changed before page 1's answer is already during the scan",
			script: versioned(step(1, func(s *fixture.Step) { s.Notify = true })),
			state:  incomplete, reason: discoveryv1.RunReason_RUN_REASON_LIST_CHANGED},
		{name: "list_changed before the re-check's answer is still during the scan",
			script: versioned(step(4, func(s *fixture.Step) { s.Notify = true })),
			state:  incomplete, reason: discoveryv1.RunReason_RUN_REASON_LIST_CHANGED},
		{name: "a list_changed scheduled after the re-check is late and changes nothing",
			script: versioned(step(5, func(s *fixture.Step) { s.Notify = true })), state: proven, tools: seven},
		{name: "a change between pages 1 and 2 makes a revision-bound server refuse page 2's cursor: -32602 is the revision moving",
			script: versioned(mutate(2, fixture.Remove("a"))),
			state:  incomplete, reason: discoveryv1.RunReason_RUN_REASON_REVISION_MISMATCH},
		{name: "an unversioned server refusing a cursor is a transport error: there is no revision to have moved",
			script: func() fixture.Script {
				s := versioned(step(2, func(s *fixture.Step) { s.Cursor = fixture.CursorForge }))
				s.Versioned = false
				return s
			}(),
			state: incomplete, reason: discoveryv1.RunReason_RUN_REASON_TRANSPORT_ERROR},
		{name: "a change between pages 1 and 2 on a lenient server shows r-2 on page 2",
			script: func() fixture.Script {
				s := versioned(mutate(2, fixture.Remove("a")))
				s.StaleCursor = fixture.StaleCursorServe
				return s
			}(),
			state: incomplete, reason: discoveryv1.RunReason_RUN_REASON_REVISION_MISMATCH},
		{name: "a change after the last page shows r-2 at the re-check",
			script: versioned(mutate(4, fixture.Upsert(fixture.NewTool("g", "changed")))),
			state:  incomplete, reason: discoveryv1.RunReason_RUN_REASON_REVISION_MISMATCH},
		{name: "a change before page 1 is simply the catalog the scan proves, at r-2",
			script: versioned(mutate(1, fixture.Remove("g"))), state: proven, tools: seven[:6]},
		{name: "A-B-A before page 1: same tools as r-1, proven at the new revision r-3",
			script: versioned(mutate(1, fixture.Upsert(fixture.NewTool("a", "B"))), mutate(1, fixture.Upsert(fixture.NewTool("a", "does a")))),
			state:  proven, tools: seven},
		{name: "page 2 without its revision",
			script: versioned(step(2, func(s *fixture.Step) { s.OmitRevision = true })),
			state:  incomplete, reason: discoveryv1.RunReason_RUN_REASON_REVISION_MISSING},
		{name: "the re-check without its revision",
			script: versioned(step(4, func(s *fixture.Step) { s.OmitRevision = true })),
			state:  incomplete, reason: discoveryv1.RunReason_RUN_REASON_REVISION_MISSING},
		{name: "page 3 with a forged revision",
			script: versioned(step(3, func(s *fixture.Step) { s.Revision = "r-999" })),
			state:  incomplete, reason: discoveryv1.RunReason_RUN_REASON_REVISION_MISMATCH},
		{name: "page 2 returns the cursor it was given",
			script: versioned(step(2, func(s *fixture.Step) { s.Cursor = fixture.CursorRepeat })),
			state:  incomplete, reason: discoveryv1.RunReason_RUN_REASON_REPEATED_CURSOR},
		{name: "page 3 returns page 2's cursor again",
			script: versioned(step(3, func(s *fixture.Step) { s.Cursor, s.CycleTo = fixture.CursorCycle, 2 })),
			state:  incomplete, reason: discoveryv1.RunReason_RUN_REASON_CURSOR_CYCLE},
		{name: "2026-07-28: an empty nextCursor on page 2 is page 1's cursor, a cycle",
			script: pin(versioned(step(2, func(s *fixture.Step) { s.Cursor = fixture.CursorEmpty })), fixture.Version20260728),
			state:  incomplete, reason: discoveryv1.RunReason_RUN_REASON_CURSOR_CYCLE},
		{name: "2026-07-28: an empty nextCursor on page 1 repeats the cursor page 1 was asked with",
			script: pin(versioned(step(1, func(s *fixture.Step) { s.Cursor = fixture.CursorEmpty })), fixture.Version20260728),
			state:  incomplete, reason: discoveryv1.RunReason_RUN_REASON_REPEATED_CURSOR},
		{name: "2025-11-25: an empty nextCursor on page 2 ends the list, so a lying server gets 6 tools proven",
			script: pin(versioned(step(2, func(s *fixture.Step) { s.Cursor = fixture.CursorEmpty })), fixture.Version20251125),
			state:  proven, tools: seven[:6], partial: true},
		{name: "a server that ends its list after page 1 is caught by the re-check, which shows a next page",
			script: versioned(step(1, func(s *fixture.Step) { s.Cursor = fixture.CursorEnd })),
			state:  incomplete, reason: discoveryv1.RunReason_RUN_REASON_REVISION_MISMATCH},
		{name: "a server that ends its list after page 2 cannot be caught: 6 tools proven, not whole",
			script: versioned(step(2, func(s *fixture.Step) { s.Cursor = fixture.CursorEnd })),
			state:  proven, tools: seven[:6], partial: true},
		{name: "the re-check cut into other pages than the walk is still whole",
			script: versioned(step(1, func(s *fixture.Step) { s.PageSize = 5 })),
			state:  proven, tools: seven},
		{name: "an unversioned catalog changed in front of the walk's pages is caught by the re-check",
			script: func() fixture.Script {
				s := versioned(mutate(4, fixture.Insert(0, fixture.NewTool("new", "new"))))
				s.Versioned = false
				return s
			}(),
			state: incomplete, reason: discoveryv1.RunReason_RUN_REASON_REVISION_MISMATCH},
		{name: "a forged cursor on page 2 gets page 3 refused with -32602, which a versioned crawl reads as the revision moving",
			script: versioned(step(2, func(s *fixture.Step) { s.Cursor = fixture.CursorForge })),
			state:  incomplete, reason: discoveryv1.RunReason_RUN_REASON_REVISION_MISMATCH},
		{name: "a JSON-RPC error on page 2",
			script: versioned(step(2, func(s *fixture.Step) { s.Error = &fixture.RPCError{Code: -32603, Message: "boom"} })),
			state:  incomplete, reason: discoveryv1.RunReason_RUN_REASON_TRANSPORT_ERROR},
		{name: "a JSON-RPC error on the re-check",
			script: versioned(step(4, func(s *fixture.Step) { s.Error = &fixture.RPCError{Code: -32000, Message: "busy"} })),
			state:  incomplete, reason: discoveryv1.RunReason_RUN_REASON_TRANSPORT_ERROR},
		{name: "the server crashes at page 2",
			script: versioned(step(2, func(s *fixture.Step) { s.Crash = true })),
			state:  incomplete, reason: discoveryv1.RunReason_RUN_REASON_TRANSPORT_ERROR},

		// Precedence.
		{name: "a change announced by list_changed: the notification comes before the page with r-2",
			script: func() fixture.Script {
				s := versioned(mutate(2, fixture.Remove("a")))
				s.NotifyOnChange, s.StaleCursor = true, fixture.StaleCursorServe
				return s
			}(),
			state: incomplete, reason: discoveryv1.RunReason_RUN_REASON_LIST_CHANGED},
		{name: "list_changed before an error answer: the notification comes first",
			script: versioned(step(2, func(s *fixture.Step) {
				s.Notify, s.Error = true, &fixture.RPCError{Code: -32603, Message: "boom"}
			})),
			state: incomplete, reason: discoveryv1.RunReason_RUN_REASON_LIST_CHANGED},
		{name: "a forged revision and a repeated cursor on one page: the revision is checked first",
			script: versioned(step(2, func(s *fixture.Step) { s.Revision, s.Cursor = "r-x", fixture.CursorRepeat })),
			state:  incomplete, reason: discoveryv1.RunReason_RUN_REASON_REVISION_MISMATCH},
		{name: "a repeated cursor on the last page the cap allows: the cursor is checked before the cap",
			script: versioned(step(2, func(s *fixture.Step) { s.Cursor = fixture.CursorRepeat })),
			limits: oracle.Limits{MaxPages: 2},
			state:  incomplete, reason: discoveryv1.RunReason_RUN_REASON_REPEATED_CURSOR},
		{name: "a content fault in a scan that is not whole: completeness wins",
			script: withTools(versioned(step(2, func(s *fixture.Step) { s.Notify = true })), dup[0], dup[1], fixture.NewTool("x", "x")),
			state:  incomplete, reason: discoveryv1.RunReason_RUN_REASON_LIST_CHANGED},

		// Caps.
		{name: "page cap 2 and a 3-page catalog: page 2 still has a next page",
			script: versioned(), limits: oracle.Limits{MaxPages: 2},
			state: incomplete, reason: discoveryv1.RunReason_RUN_REASON_PAGE_CAP},
		{name: "page cap 3 and a 3-page catalog fit exactly",
			script: versioned(), limits: oracle.Limits{MaxPages: 3}, state: proven, tools: seven},
		{name: "tool cap 5: page 2 brings the count to 6",
			script: versioned(), limits: oracle.Limits{MaxTools: 5},
			state: incomplete, reason: discoveryv1.RunReason_RUN_REASON_TOOL_CAP},
		{name: "tool cap 7 fits 7 tools exactly",
			script: versioned(), limits: oracle.Limits{MaxTools: 7}, state: proven, tools: seven},

		// Validation.
		{name: "two tools named dup with different schemas",
			script: withTools(versioned(), fixture.NewTool("a", "a"), dup[0], dup[1]),
			state:  quarantined, reason: discoveryv1.RunReason_RUN_REASON_DUPLICATE_TOOL_NAME},
		{name: "the first broken tool decides: a bad name before a duplicate pair is reported",
			script: withTools(versioned(), fixture.NewTool("bad name", "x"), dup[0], dup[1]),
			state:  quarantined, reason: discoveryv1.RunReason_RUN_REASON_INVALID_TOOL_NAME},
		{name: "the first broken tool decides: a duplicate pair before an unknown dialect is reported",
			script: withTools(versioned(), dup[0], dup[1], fixture.ToolWithDialect("z", "https://json-schema.org/draft/2019-09/schema")),
			state:  quarantined, reason: discoveryv1.RunReason_RUN_REASON_DUPLICATE_TOOL_NAME},
		{name: "the first broken tool decides: an unknown dialect before a duplicate pair is reported",
			script: withTools(versioned(), fixture.ToolWithDialect("z", "https://json-schema.org/draft/2019-09/schema"), dup[0], dup[1]),
			state:  quarantined, reason: discoveryv1.RunReason_RUN_REASON_UNKNOWN_DIALECT},
		{name: "an unversioned catalog is validated too",
			script: fixture.Script{PageSize: 3, Tools: []fixture.Tool{dup[0], dup[1]}},
			state:  quarantined, reason: discoveryv1.RunReason_RUN_REASON_DUPLICATE_TOOL_NAME},
		{name: "a tool that is not an object",
			script: withTools(versioned(), fixture.NewTool("a", "a"), fixture.MustRawTool(`"not a tool"`)),
			state:  quarantined, reason: discoveryv1.RunReason_RUN_REASON_MALFORMED_TOOL},
		{name: "a tool without a name",
			script: withTools(versioned(), fixture.MustRawTool(`{"inputSchema":{"type":"object"}}`)),
			state:  quarantined, reason: discoveryv1.RunReason_RUN_REASON_MALFORMED_TOOL},
		{name: "a tool without an input schema",
			script: withTools(versioned(), fixture.MustRawTool(`{"name":"a"}`)),
			state:  quarantined, reason: discoveryv1.RunReason_RUN_REASON_INVALID_SCHEMA},
		{name: "an input schema of type string",
			script: withTools(versioned(), fixture.ToolWithSchema("a", "a", map[string]any{"type": "string"})),
			state:  quarantined, reason: discoveryv1.RunReason_RUN_REASON_INVALID_SCHEMA},
		{name: "an output schema that is not an object schema",
			script: withTools(versioned(), fixture.NewTool("a", "a").With("outputSchema", []int{1})),
			state:  quarantined, reason: discoveryv1.RunReason_RUN_REASON_INVALID_SCHEMA},
		{name: "the 2019-09 dialect is not on the allow-list",
			script: withTools(versioned(), fixture.ToolWithDialect("a", "https://json-schema.org/draft/2019-09/schema")),
			state:  quarantined, reason: discoveryv1.RunReason_RUN_REASON_UNKNOWN_DIALECT},
		{name: "draft-07 (http, with #) and 2020-12 are allowed",
			script: withTools(versioned(),
				fixture.ToolWithDialect("a", "http://json-schema.org/draft-07/schema#"),
				fixture.ToolWithDialect("b", "https://json-schema.org/draft/2020-12/schema")),
			state: proven, tools: []string{"a", "b"}},
		{name: "a $schema in a subschema is pinned too",
			script: withTools(versioned(), fixture.ToolWithSchema("a", "a", map[string]any{"type": "object",
				"properties": map[string]any{"x": map[string]any{"$schema": "https://json-schema.org/draft/2019-09/schema"}}})),
			state: quarantined, reason: discoveryv1.RunReason_RUN_REASON_UNKNOWN_DIALECT},
		{name: "data that looks like a $ref or $schema is data, and a property may be named $schema",
			script: withTools(versioned(), fixture.ToolWithSchema("a", "a", map[string]any{"type": "object",
				"default":    map[string]any{"$ref": "https://schemas.invalid/x.json", "$schema": "x"},
				"properties": map[string]any{"$schema": map[string]any{"type": "string", "enum": []any{map[string]any{"$ref": "y.json"}}}}})),
			state: proven, tools: []string{"a"}},
		{name: "a network $recursiveRef",
			script: withTools(versioned(), fixture.ToolWithSchema("a", "a", map[string]any{"type": "object",
				"properties": map[string]any{"x": map[string]any{"$recursiveRef": "https://schemas.invalid/x.json"}}})),
			state: quarantined, reason: discoveryv1.RunReason_RUN_REASON_NETWORK_REF},
		{name: "a network $ref",
			script: withTools(versioned(), fixture.ToolWithRef("a", "https://schemas.invalid/x.json")),
			state:  quarantined, reason: discoveryv1.RunReason_RUN_REASON_NETWORK_REF},
		{name: "a relative $ref is outside the document too",
			script: withTools(versioned(), fixture.ToolWithRef("a", "other.json#/x")),
			state:  quarantined, reason: discoveryv1.RunReason_RUN_REASON_NETWORK_REF},
		{name: "a local $ref that does not resolve",
			script: withTools(versioned(), fixture.ToolWithRef("a", "#/$defs/missing")),
			state:  quarantined, reason: discoveryv1.RunReason_RUN_REASON_UNRESOLVED_REF},
		{name: "local $refs that resolve: a pointer, an escaped pointer, an anchor and the root",
			script: withTools(versioned(), fixture.ToolWithSchema("a", "a", map[string]any{
				"type": "object",
				"$defs": map[string]any{
					"id":  map[string]any{"type": "string"},
					"a/b": map[string]any{"$anchor": "slashed", "type": "integer"},
				},
				"properties": map[string]any{
					"x": map[string]any{"$ref": "#/$defs/id"},
					"y": map[string]any{"$ref": "#/$defs/a~1b"},
					"z": map[string]any{"$ref": "#slashed"},
					"w": map[string]any{"$ref": "#"},
				},
			})),
			state: proven, tools: []string{"a"}},
		{name: "a schema over the size limit",
			script: withTools(versioned(), fixture.ToolWithLargeSchema("a", 5000)),
			limits: oracle.Limits{MaxSchemaBytes: 4096},
			state:  quarantined, reason: discoveryv1.RunReason_RUN_REASON_SCHEMA_TOO_LARGE},
		{name: "a tool over the tool size limit",
			script: withTools(versioned(), fixture.ToolWithLargeSchema("a", 5000)),
			limits: oracle.Limits{MaxToolBytes: 4096},
			state:  quarantined, reason: discoveryv1.RunReason_RUN_REASON_SCHEMA_TOO_LARGE},
		{name: "10 nested levels are 19 JSON levels, over a depth limit of 18",
			script: withTools(versioned(), fixture.ToolWithDeepSchema("a", 10)),
			limits: oracle.Limits{MaxSchemaDepth: 18},
			state:  quarantined, reason: discoveryv1.RunReason_RUN_REASON_SCHEMA_TOO_DEEP},
		{name: "10 nested levels fit a depth limit of 19",
			script: withTools(versioned(), fixture.ToolWithDeepSchema("a", 10)),
			limits: oracle.Limits{MaxSchemaDepth: 19}, state: proven, tools: []string{"a"}},
		{name: "an http icon",
			script: withTools(versioned(), fixture.ToolWithIcon("a", "http://icons.invalid/a.png")),
			state:  quarantined, reason: discoveryv1.RunReason_RUN_REASON_INVALID_ICON},
		{name: "https and data icons are fine",
			script: withTools(versioned(), fixture.ToolWithIcon("a", "https://icons.invalid/a.png"),
				fixture.ToolWithIcon("b", "data:image/png;base64,AAAA")),
			state: proven, tools: []string{"a", "b"}},
		{name: "invalid names, one by one",
			script: withTools(versioned(), fixture.NewTool("has space", "x")),
			state:  quarantined, reason: discoveryv1.RunReason_RUN_REASON_INVALID_TOOL_NAME},
		{name: "a description with instructions for the model is not refused (only flagged)",
			script: withTools(versioned(), fixture.ToolWithInstructions("a")), state: proven, tools: []string{"a"}},
		{name: "an unknown field is kept and digested",
			script: withTools(versioned(), fixture.MustRawTool(`{"name":"a","inputSchema":{"type":"object"},"x-vendor":{"k":[1,2]}}`)),
			state:  proven, tools: []string{"a"}},
	}
}

func pin(s fixture.Script, version string) fixture.Script {
	s.ProtocolVersion = version
	return s
}

func TestScenarios(t *testing.T) {
	for _, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			s := start(t, sc.script)
			events := drive(t, s, inMemory(t, s), sc.script.ProtocolVersion)
			got, err := oracle.Expect(events, sc.config())
			if err != nil {
				t.Fatalf("Expect: %v", err)
			}
			checkOutcome(t, got, sc)
		})
	}
}

func TestScenariosOverHTTP(t *testing.T) {
	// The same judgement from a log written over the real transport.
	for i, sc := range scenarios() {
		if i%4 != 0 {
			continue
		}
		t.Run(sc.name, func(t *testing.T) {
			s := start(t, sc.script)
			events := drive(t, s, overHTTP(t, s), sc.script.ProtocolVersion)
			got, err := oracle.Expect(events, sc.config())
			if err != nil {
				t.Fatalf("Expect: %v", err)
			}
			checkOutcome(t, got, sc)
		})
	}
}

func checkOutcome(t *testing.T, got oracle.Outcome, sc scenario) {
	t.Helper()
	if got.State != sc.state || got.Reason != sc.reason {
		t.Fatalf("outcome %s (%s), want %s/%s", got, got.Detail, sc.state, sc.reason)
	}
	if !got.Activates() {
		if got.Tools != nil {
			t.Fatalf("a %s outcome carries %d tools", got, len(got.Tools))
		}
		return
	}
	var names []string
	for _, tool := range got.Tools {
		names = append(names, tool.Name)
		want, err := canonical.Digest(tool.JSON)
		if err != nil || tool.DescriptorDigest != want || !canonical.ValidDigest(tool.DescriptorDigest) {
			t.Fatalf("tool %s digest %s, want %s (%v)", tool.Name, tool.DescriptorDigest, want, err)
		}
	}
	if !slices.Equal(names, sc.tools) {
		t.Fatalf("activates %v, want %v", names, sc.tools)
	}
	if got.Whole == sc.partial {
		t.Fatalf("whole = %v, want %v", got.Whole, !sc.partial)
	}
	if got.EligibleForAutonomousSideEffects() != (sc.state == proven) {
		t.Fatalf("%s eligible for autonomous side effects = %v", got, got.EligibleForAutonomousSideEffects())
	}
}

func TestDigestsAreOfTheToolAsServed(t *testing.T) {
	// The digest is over the served bytes in canonical form, so two
	// spellings of one tool digest alike and a changed description does not.
	spelled := fixture.MustRawTool(`{ "inputSchema": {"type":"object"}, "name": "a", "description": "d" }`)
	s := start(t, withTools(versioned(), spelled))
	got, err := oracle.Expect(drive(t, s, inMemory(t, s), ""), oracle.Config{RevisionSource: serverProvided})
	if err != nil {
		t.Fatal(err)
	}
	same, _ := canonical.Digest([]byte(`{"description":"d","inputSchema":{"type":"object"},"name":"a"}`))
	changed, _ := canonical.Digest([]byte(`{"description":"d2","inputSchema":{"type":"object"},"name":"a"}`))
	if d := got.ToolDigests()["a"]; d != same || d == changed {
		t.Fatalf("digest %s, want %s", d, same)
	}
}

func TestByteCapCountsResultBytes(t *testing.T) {
	// Page sizes come from a clean run; a cap one byte short of pages 1+2
	// stops the scan at page 2, a cap of exactly pages 1–3 lets it through.
	s := start(t, versioned())
	clean := drive(t, s, inMemory(t, s), "")
	var bytes []int64
	for _, e := range clean {
		if e.Kind == fixture.EventPage {
			bytes = append(bytes, int64(e.Bytes))
		}
	}
	if len(bytes) != 4 {
		t.Fatalf("%d pages in a clean run, want 3 and the re-check", len(bytes))
	}
	cases := []struct {
		cap    int64
		state  catalogv1.DiscoveryState
		reason discoveryv1.RunReason
	}{
		{bytes[0] + bytes[1] - 1, incomplete, discoveryv1.RunReason_RUN_REASON_BYTE_CAP},
		{bytes[0] + bytes[1] + bytes[2], proven, none},
	}
	for _, tc := range cases {
		got, err := oracle.Expect(clean, oracle.Config{RevisionSource: serverProvided, Limits: oracle.Limits{MaxBytes: tc.cap}})
		if err != nil || got.State != tc.state || got.Reason != tc.reason {
			t.Errorf("cap %d: %s, %v; want %s/%s", tc.cap, got, err, tc.state, tc.reason)
		}
	}
}

func TestCacheScopePrivateIsReported(t *testing.T) {
	s := start(t, fixture.Script{ProtocolVersion: fixture.Version20260728, Versioned: true, Tools: named("a"),
		Cache: &fixture.CacheHint{Scope: "private"}})
	got, err := oracle.Expect(drive(t, s, inMemory(t, s), ""), oracle.Config{RevisionSource: serverProvided})
	if err != nil || got.State != proven || got.CacheScope != "private" {
		t.Fatalf("%s cacheScope %q, %v; want proven and private", got, got.CacheScope, err)
	}
}

func TestAClientCacheThatAnswersTheRecheckLeavesTheScanUnfinished(t *testing.T) {
	// At 2026-07-28 go-sdk's ListTools caches pages by cursor for ttlMs:
	// a re-check answered from that cache never reaches the server, so the
	// log proves nothing about the revision at the end of the scan.
	s := start(t, fixture.Script{ProtocolVersion: fixture.Version20260728, Versioned: true, PageSize: 1,
		Tools: named("a", "b"), Cache: &fixture.CacheHint{TTLMs: 60_000, Scope: "public"}})
	_, err := oracle.Expect(drive(t, s, inMemory(t, s), ""), oracle.Config{RevisionSource: serverProvided})
	if !errors.Is(err, oracle.ErrUnfinished) {
		t.Fatalf("Expect = %v, want ErrUnfinished", err)
	}
}

// Over concurrent streams (streamable HTTP) a list_changed written on a
// request's stream and a dropped connection that the client may see first
// on its standalone stream are not ordered for the client: LIST_CHANGED and
// TRANSPORT_ERROR are both right, INCOMPLETE either way. Over one ordered
// stream only LIST_CHANGED is.
func TestNotificationThenDropIsUnorderedOnlyOverConcurrentStreams(t *testing.T) {
	script := versioned()
	script.Steps = []fixture.Step{{Request: 2, Notify: true}, {Request: 2, Crash: true}}
	s := start(t, script)
	events := drive(t, s, inMemory(t, s), "")
	for _, concurrent := range []bool{false, true} {
		got, err := oracle.Expect(events, oracle.Config{RevisionSource: serverProvided, ConcurrentStreams: concurrent})
		if err != nil {
			t.Fatal(err)
		}
		if got.State != catalogv1.DiscoveryState_DISCOVERY_STATE_INCOMPLETE || got.Reason != discoveryv1.RunReason_RUN_REASON_LIST_CHANGED {
			t.Fatalf("concurrent=%v: %v %v", concurrent, got.State, got.Reason)
		}
		wantAlso := 0
		if concurrent {
			wantAlso = 1
		}
		if len(got.AlsoAllowed) != wantAlso || concurrent && got.AlsoAllowed[0] != discoveryv1.RunReason_RUN_REASON_TRANSPORT_ERROR {
			t.Fatalf("concurrent=%v: also allowed %v", concurrent, got.AlsoAllowed)
		}
	}
	// A drop alone, or a notification alone, stays one reason.
	for _, steps := range [][]fixture.Step{{{Request: 2, Crash: true}}, {{Request: 2, Notify: true}}} {
		script := versioned()
		script.Steps = steps
		s := start(t, script)
		got, err := oracle.Expect(drive(t, s, inMemory(t, s), ""), oracle.Config{RevisionSource: serverProvided, ConcurrentStreams: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.AlsoAllowed) != 0 {
			t.Fatalf("steps %+v: also allowed %v", steps, got.AlsoAllowed)
		}
	}
}

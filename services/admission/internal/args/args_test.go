package args

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/toolcrib/toolcrib/platform/canonical"
	"github.com/toolcrib/toolcrib/platform/schema"
)

const shipmentSchema = `{"type":"object","properties":{
  "shipment_id":{"type":"string","pattern":"^S[0-9]{4}$"},
  "items":{"type":"array","items":{"type":"object","properties":{"qty":{"type":"integer","minimum":1}},"required":["qty"]}}
},"required":["shipment_id"],"additionalProperties":false}`

func schemaOf(s string) func() ([]byte, error) {
	return func() ([]byte, error) { return []byte(s), nil }
}

func mustParse(t *testing.T, raw string) map[string]any {
	t.Helper()
	p, problem := Parse([]byte(raw), DefaultLimits)
	if problem != "" {
		t.Fatalf("Parse(%.40s): %s", raw, problem)
	}
	return p.Value
}

func TestCheckFirstViolationPointer(t *testing.T) {
	v := NewValidator(16)
	cases := []struct {
		args, ptr string
	}{
		{`{"shipment_id":"S1234"}`, ""},
		{`{"shipment_id":"S1234","items":[{"qty":1},{"qty":2}]}`, ""},
		{`{}`, "/"},
		{`{"shipment_id":7}`, "/shipment_id"},
		{`{"shipment_id":"nope"}`, "/shipment_id"},
		{`{"shipment_id":"S1234","items":[{"qty":1},{"qty":0}]}`, "/items/1/qty"},
		{`{"shipment_id":"S1234","items":[{"qty":1},{}]}`, "/items/1"},
		// Two violations: the smaller instance location is reported, every
		// time (the validator walks maps in random order).
		{`{"shipment_id":5,"items":[{"qty":"x"}]}`, "/items/0/qty"},
	}
	for _, tc := range cases {
		for range 5 {
			got := v.Check("sha256:s1", schemaOf(shipmentSchema), mustParse(t, tc.args))
			if (got.Problem == "") != (tc.ptr == "") || got.Pointer != tc.ptr {
				t.Fatalf("%s: got %+v, want pointer %q", tc.args, got, tc.ptr)
			}
		}
	}
	if n := v.Compiles(); n != 1 {
		t.Fatalf("compiled %d times for one digest", n)
	}
}

func TestPointerEscapes(t *testing.T) {
	if p := Pointer([]string{"a/b", "c~d", "0"}); p != "/a~1b/c~0d/0" {
		t.Fatal(p)
	}
}

func TestCompiledOncePerDigestAndBounded(t *testing.T) {
	v := NewValidator(2)
	calls := 0
	src := func() ([]byte, error) { calls++; return []byte(`{"type":"object"}`), nil }
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() { defer wg.Done(); v.Check("sha256:a", schemaOf(`{"type":"object"}`), map[string]any{}) }()
	}
	wg.Wait()
	before := v.Compiles()
	for range 10 {
		v.Check("sha256:a", src, map[string]any{})
	}
	if v.Compiles() != before || calls != 0 {
		t.Fatalf("a cached digest was compiled again (%d→%d, %d reads)", before, v.Compiles(), calls)
	}
	for i := range 10 {
		v.Check(fmt.Sprintf("sha256:%d", i), src, map[string]any{})
	}
	if v.cache.Len() > 2 {
		t.Fatalf("cache holds %d > 2 schemas", v.cache.Len())
	}
}

func TestNoRefIsFetched(t *testing.T) {
	v := NewValidator(8)
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"$ref":"http://127.0.0.1:1/evil.json"}}}`,
		`{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json#/x"}}}`,
		`{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}}`,
	} {
		got := v.Check(canonical.DigestBytes([]byte(s)), schemaOf(s), map[string]any{"a": 1.0})
		if got.Problem == "" || !strings.Contains(got.Problem, "nothing is fetched") {
			t.Errorf("%s: %+v", s, got)
		}
	}
	if v.LoadAttempts() == 0 {
		t.Fatal("the refusing loader was never asked: the refs were resolved some other way")
	}
	// A local ref still works.
	local := `{"type":"object","$defs":{"id":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/id"}}}`
	if got := v.Check("sha256:local", schemaOf(local), map[string]any{"a": "x"}); got.Problem != "" {
		t.Fatalf("local ref: %+v", got)
	}
	if got := v.Check("sha256:local", schemaOf(local), mustParse(t, `{"a":1}`)); got.Pointer != "/a" {
		t.Fatalf("local ref violation: %+v", got)
	}
}

func TestPinnedDialect(t *testing.T) {
	v := NewValidator(8)
	// 2020-12 by default: prefixItems is a keyword there, not in draft-07.
	tuple := `{"type":"object","properties":{"t":{"type":"array","prefixItems":[{"type":"integer"}]}}}`
	if got := v.Check("sha256:t1", schemaOf(tuple), mustParse(t, `{"t":["x"]}`)); got.Pointer != "/t/0" {
		t.Fatalf("no $schema is 2020-12: %+v", got)
	}
	d7 := `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"t":{"type":"array","prefixItems":[{"type":"integer"}]}}}`
	if got := v.Check("sha256:t2", schemaOf(d7), mustParse(t, `{"t":["x"]}`)); got.Problem != "" {
		t.Fatalf("draft-07 ignores prefixItems: %+v", got)
	}
	for _, s := range []string{
		`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object"}`,
		`{"$schema":"https://json-schema.org/draft/2019-09/schema","type":"object"}`,
		`{"$schema":"http://127.0.0.1:1/meta","type":"object"}`,
	} {
		got := v.Check(canonical.DigestBytes([]byte(s)), schemaOf(s), map[string]any{})
		if !strings.Contains(got.Problem, schema.ErrUnknownDialect.Error()) {
			t.Errorf("%s: %+v", s, got)
		}
	}
}

func TestSchemaUnavailableIsNotCached(t *testing.T) {
	v := NewValidator(4)
	got := v.Check("sha256:x", func() ([]byte, error) { return nil, errors.New("down") }, map[string]any{})
	if got.Problem == "" {
		t.Fatal("an unavailable schema passed")
	}
	if got := v.Check("sha256:x", schemaOf(`{"type":"object"}`), map[string]any{}); got.Problem != "" {
		t.Fatalf("the failure was cached: %+v", got)
	}
}

func TestParseLimits(t *testing.T) {
	mb := `{"a":"` + strings.Repeat("x", 1<<20) + `"}`
	deep := strings.Repeat(`{"a":`, 40) + "1" + strings.Repeat("}", 40)
	many := "{\"a\":[" + strings.TrimSuffix(strings.Repeat("1,", 5000), ",") + "]}"
	cases := []struct{ raw, want string }{
		{mb, ProblemTooLarge},
		{deep, ProblemTooDeep},
		{many, ProblemTooMany},
		{`[1]`, ProblemNotObject},
		{`"shipment:readwrite"`, ProblemNotObject},
		{`{"a":1} {}`, ProblemNotJSON},
		{`{"a":`, ProblemNotJSON},
		{"\xff", ProblemNotJSON},
		{``, ""},
		{`{"b":1,"a":[true,null]}`, ""},
	}
	for _, tc := range cases {
		_, p := Parse([]byte(tc.raw), DefaultLimits)
		if p != tc.want {
			t.Errorf("%.30q: %q, want %q", tc.raw, p, tc.want)
		}
		if len(p) > 80 || strings.Contains(p, "xxx") {
			t.Errorf("problem echoes the input: %q", p)
		}
	}
	a, _ := Parse([]byte(`{"b":1, "a":2}`), DefaultLimits)
	b, _ := Parse([]byte(`{"a":2,"b":1}`), DefaultLimits)
	if a.Digest != b.Digest || !canonical.ValidDigest(a.Digest) {
		t.Fatalf("argument digest is not canonical: %s %s", a.Digest, b.Digest)
	}
}

// TestMegabyteThroughValidation: even a value right at the cap is validated
// in bounded time and the detail stays bounded.
func TestLongStringDetailBounded(t *testing.T) {
	v := NewValidator(4)
	s := `{"type":"object","properties":{"a":{"type":"string","maxLength":3}}}`
	long := `{"a":"` + strings.Repeat("y", 60<<10) + `"}`
	got := v.Check("sha256:m", schemaOf(s), mustParse(t, long))
	if got.Pointer != "/a" || len(got.Problem) > maxText+4 {
		t.Fatalf("%d bytes of problem, pointer %q", len(got.Problem), got.Pointer)
	}
}

func BenchmarkCheck(b *testing.B) {
	v := NewValidator(16)
	args, _ := Parse([]byte(`{"shipment_id":"S1234","items":[{"qty":1},{"qty":2}]}`), DefaultLimits)
	for b.Loop() {
		v.Check("sha256:s1", schemaOf(shipmentSchema), args.Value)
	}
}

// TestDialectsDiscoveryAdmits: every spelling of an allowed dialect that
// discovery admits is usable here (admission once refused
// https://json-schema.org/draft-07/schema, failing every call of a tool
// discovery had accepted).
func TestDialectsDiscoveryAdmits(t *testing.T) {
	v := NewValidator(8)
	for _, d := range []string{"https://json-schema.org/draft-07/schema", "https://json-schema.org/draft-07/schema#",
		"http://json-schema.org/draft-07/schema", "https://json-schema.org/draft/2020-12/schema#"} {
		s := `{"$schema":"` + d + `","type":"object","required":["a"]}`
		if got := v.Check(canonical.DigestBytes([]byte(s)), schemaOf(s), map[string]any{}); got.Problem != "missing property 'a'" || got.Pointer != "/" {
			t.Errorf("%s: %+v, want the schema applied", d, got)
		}
	}
}

package schema

import (
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
)

// TestDialectAllowList pins the allow-list: 2020-12 and draft-07 in any of
// their spellings, nothing else.
func TestDialectAllowList(t *testing.T) {
	for in, want := range map[string]string{
		"https://json-schema.org/draft/2020-12/schema":  Draft2020,
		"https://json-schema.org/draft/2020-12/schema#": Draft2020,
		"http://json-schema.org/draft/2020-12/schema":   Draft2020,
		"http://json-schema.org/draft-07/schema#":       Draft07,
		"http://json-schema.org/draft-07/schema":        Draft07,
		"https://json-schema.org/draft-07/schema#":      Draft07,
		"https://json-schema.org/draft-07/schema":       Draft07,
		"http://json-schema.org/draft-04/schema#":       "",
		"https://json-schema.org/draft/2019-09/schema":  "",
		"https://json-schema.org/draft/2020-12/schema/": "",
		"json-schema.org/draft-07/schema":               "",
		"ftp://json-schema.org/draft-07/schema":         "",
		"https://evil.example/schema":                   "",
		"":                                              "",
	} {
		got, ok := Dialect(in)
		if got != want || ok != (want != "") {
			t.Errorf("Dialect(%q) = %q %v, want %q", in, got, ok, want)
		}
	}
}

// TestCompileDialects: no `$schema` is 2020-12 (prefixItems applies),
// draft-07 is honoured (prefixItems is not a keyword there), and every
// other root `$schema` is refused with ErrUnknownDialect before compiling.
func TestCompileDialects(t *testing.T) {
	var c Compiler
	tuple := `"type":"array","prefixItems":[{"type":"integer"}]`
	for _, s := range []struct {
		schema  string
		refuses bool // ["x"] is refused
	}{
		{`{` + tuple + `}`, true},
		{`{"$schema":"https://json-schema.org/draft/2020-12/schema",` + tuple + `}`, true},
		{`{"$schema":"http://json-schema.org/draft-07/schema#",` + tuple + `}`, false},
		{`{"$schema":"https://json-schema.org/draft-07/schema",` + tuple + `}`, false},
	} {
		sch, err := c.Compile([]byte(s.schema))
		if err != nil {
			t.Fatalf("%s: %v", s.schema, err)
		}
		if got := sch.Validate([]any{"x"}) != nil; got != s.refuses {
			t.Errorf("%s: refuses [\"x\"] %v, want %v", s.schema, got, s.refuses)
		}
	}
	for _, s := range []string{
		`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object"}`,
		`{"$schema":"https://json-schema.org/draft/2019-09/schema","type":"object"}`,
		`{"$schema":"http://127.0.0.1:1/meta","type":"object"}`,
		`{"$schema":7,"type":"object"}`,
	} {
		if _, err := c.Compile([]byte(s)); !errors.Is(err, ErrUnknownDialect) {
			t.Errorf("%s: %v, want ErrUnknownDialect", s, err)
		}
	}
	if n := c.LoadAttempts(); n != 0 {
		t.Errorf("%d loads for allowed and refused dialects", n)
	}
}

// TestNothingIsFetched: references outside the document (network, file,
// an unknown metaschema in a subschema) are refused by the loader without
// any I/O; local references resolve.
func TestNothingIsFetched(t *testing.T) {
	var hits atomic.Int64
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte(`{"type":"string"}`))
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	base := "http://" + l.Addr().String()

	var c Compiler
	for _, s := range []string{
		`{"properties":{"a":{"$ref":"` + base + `/s.json"}}}`,
		`{"properties":{"a":{"$ref":"` + base + `/s.json#/x"}}}`,
		`{"properties":{"a":{"$ref":"file:///etc/passwd"}}}`,
		`{"$defs":{"x":{"$id":"urn:x","$schema":"` + base + `/meta"}}}`,
	} {
		before := c.LoadAttempts()
		if _, err := c.Compile([]byte(s)); !errors.Is(err, ErrLoadRefused) {
			t.Errorf("%s: %v, want ErrLoadRefused", s, err)
		}
		if c.LoadAttempts() <= before {
			t.Errorf("%s: the refusing loader was never asked", s)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the schema server was contacted %d times", n)
	}
	local := `{"$defs":{"id":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/id"}}}`
	sch, err := c.Compile([]byte(local))
	if err != nil {
		t.Fatalf("local ref: %v", err)
	}
	if sch.Validate(map[string]any{"a": "x"}) != nil || sch.Validate(map[string]any{"a": 1}) == nil {
		t.Fatal("the local ref is not applied")
	}
	if _, err := c.Compile([]byte(`{"type":`)); err == nil || errors.Is(err, ErrLoadRefused) {
		t.Fatalf("not JSON: %v", err)
	}
}

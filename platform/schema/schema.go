package schema

import (
	"bytes"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The dialects a schema may name in `$schema`, in their canonical
// spelling.
const (
	Draft2020 = "https://json-schema.org/draft/2020-12/schema"
	Draft07   = "http://json-schema.org/draft-07/schema#"
)

// dialects maps every accepted spelling of `$schema` to the dialect it
// names.
var dialects = map[string]string{
	"https://json-schema.org/draft/2020-12/schema":  Draft2020,
	"https://json-schema.org/draft/2020-12/schema#": Draft2020,
	"http://json-schema.org/draft/2020-12/schema":   Draft2020,
	"http://json-schema.org/draft/2020-12/schema#":  Draft2020,
	"http://json-schema.org/draft-07/schema#":       Draft07,
	"http://json-schema.org/draft-07/schema":        Draft07,
	"https://json-schema.org/draft-07/schema#":      Draft07,
	"https://json-schema.org/draft-07/schema":       Draft07,
}

// Dialect returns the dialect a `$schema` value names ([Draft2020] or
// [Draft07]; http or https, with or without an empty fragment); ok is
// false for anything else.
func Dialect(s string) (dialect string, ok bool) {
	d, ok := dialects[s]
	return d, ok
}

// ErrLoadRefused is wrapped by every compile error that asked to load a
// document: nothing is fetched.
var ErrLoadRefused = errors.New("schema loading is disabled; nothing is fetched")

// ErrUnknownDialect is returned for a root `$schema` outside the
// allow-list (2020-12, draft-07).
var ErrUnknownDialect = errors.New("unknown schema dialect (allowed: 2020-12, draft-07)")

// ResourceURL is where a schema under compilation is registered; it
// appears in the library's error texts (callers replace it before showing
// one).
const ResourceURL = "urn:toolcrib:schema"

// Compiler compiles schemas under the rule of the package doc and counts
// the loads it refused. The zero value is ready; safe for concurrent use.
type Compiler struct {
	loads atomic.Int64
}

// LoadAttempts is how many times compiling asked to load a URL (each was
// refused without any I/O).
func (c *Compiler) LoadAttempts() int64 { return c.loads.Load() }

type refusingLoader struct{ c *Compiler }

func (l refusingLoader) Load(u string) (any, error) {
	l.c.loads.Add(1)
	return nil, ErrLoadRefused
}

// Compile compiles one schema document. It fails with [ErrUnknownDialect]
// for a root `$schema` outside the allow-list, with an error wrapping
// [ErrLoadRefused] when a reference would load anything, and with the
// library's error otherwise.
func (c *Compiler) Compile(raw []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if obj, ok := doc.(map[string]any); ok {
		if s, present := obj["$schema"]; present {
			str, _ := s.(string)
			if _, ok := Dialect(str); !ok {
				return nil, ErrUnknownDialect
			}
		}
	}
	jc := jsonschema.NewCompiler()
	jc.UseLoader(refusingLoader{c})
	jc.DefaultDraft(jsonschema.Draft2020)
	if err := jc.AddResource(ResourceURL, doc); err != nil {
		return nil, err
	}
	sch, err := jc.Compile(ResourceURL)
	var load *jsonschema.LoadURLError
	if err != nil && errors.As(err, &load) && !errors.Is(err, ErrLoadRefused) {
		// The library's LoadURLError does not unwrap to the loader's error.
		err = fmt.Errorf("%w: %v", ErrLoadRefused, err)
	}
	return sch, err
}

package validate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/santhosh-tekuri/jsonschema/v6"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/platform/canonical"
)

// ErrLoadRefused is returned (wrapped) whenever the compiler asks to load a
// URL: schemas are compiled from their own document only.
var ErrLoadRefused = errors.New("validate: schema loading is disabled; nothing is fetched")

var loadAttempts atomic.Int64

// LoadAttempts is how many times a compiler of this package asked to load a
// URL since the process started (each was refused without any I/O).
func LoadAttempts() int64 { return loadAttempts.Load() }

// refusingLoader is the only loader the compiler gets: it refuses every URL,
// so neither a network nor a file reference is ever followed. The dialect
// metaschemas are built into the library and need no loader.
type refusingLoader struct{}

func (refusingLoader) Load(u string) (any, error) {
	loadAttempts.Add(1)
	return nil, fmt.Errorf("%w (%s)", ErrLoadRefused, u)
}

// resourceURL is where a schema under compilation is registered.
const resourceURL = "urn:toolcrib:schema"

// Compile compiles one schema document (2020-12 unless its `$schema` says
// draft-07) without ever loading anything else. Admission may use it to
// validate arguments under a pinned schema.
func Compile(schema json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refusingLoader{})
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(resourceURL, doc); err != nil {
		return nil, err
	}
	sch, err := c.Compile(resourceURL)
	var load *jsonschema.LoadURLError
	if errors.As(err, &load) && !errors.Is(err, ErrLoadRefused) {
		// The library's LoadURLError does not unwrap to the loader's error.
		err = fmt.Errorf("%w: %v", ErrLoadRefused, err)
	}
	return sch, err
}

// verdicts caches compile outcomes by schema digest (nil finding = valid).
var verdicts = struct {
	sync.Mutex
	m map[string]*Finding
}{m: map[string]*Finding{}}

const maxVerdicts = 100_000

func compileVerdict(canon json.RawMessage, dialect string) *Finding {
	key := canonical.DigestBytes(canon)
	verdicts.Lock()
	f, ok := verdicts.m[key]
	verdicts.Unlock()
	if ok {
		return copyFinding(f)
	}
	f = classify(Compile(canon))
	verdicts.Lock()
	if len(verdicts.m) >= maxVerdicts {
		for k := range verdicts.m { // evict an arbitrary tenth
			delete(verdicts.m, k)
			if len(verdicts.m) < maxVerdicts*9/10 {
				break
			}
		}
	}
	verdicts.m[key] = f
	verdicts.Unlock()
	return copyFinding(f)
}

func copyFinding(f *Finding) *Finding {
	if f == nil {
		return nil
	}
	c := *f
	return &c
}

func classify(_ *jsonschema.Schema, err error) *Finding {
	if err == nil {
		return nil
	}
	var (
		ptr  *jsonschema.JSONPointerNotFoundError
		anc  *jsonschema.AnchorNotFoundError
		load *jsonschema.LoadURLError
	)
	switch {
	case errors.Is(err, ErrLoadRefused) || errors.As(err, &load):
		return &Finding{Reason: discoveryv1.RunReason_RUN_REASON_NETWORK_REF, Detail: "a reference points outside the document; it was not fetched"}
	case errors.As(err, &ptr) || errors.As(err, &anc):
		return &Finding{Reason: discoveryv1.RunReason_RUN_REASON_UNRESOLVED_REF, Detail: bound(err.Error())}
	default:
		return &Finding{Reason: discoveryv1.RunReason_RUN_REASON_INVALID_SCHEMA, Detail: bound(err.Error())}
	}
}

func bound(s string) string {
	s = string(bytes.ReplaceAll([]byte(s), []byte(resourceURL), []byte("schema")))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

package args

import (
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"unicode"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/toolcrib/toolcrib/platform/canonical"
	"github.com/toolcrib/toolcrib/platform/schema"
	"github.com/toolcrib/toolcrib/services/admission/internal/decision"
)

// Limits caps the arguments of one call.
type Limits struct {
	// MaxBytes is the largest arguments document, in bytes.
	MaxBytes int
	// MaxDepth is the deepest nesting of objects and arrays.
	MaxDepth int
	// MaxValues is the most JSON values (of any kind) in the document.
	MaxValues int
}

// DefaultLimits are the limits a replica uses unless configured otherwise.
var DefaultLimits = Limits{MaxBytes: 64 << 10, MaxDepth: 32, MaxValues: 4096}

// Parsed is a parsed arguments document.
type Parsed struct {
	// Value is the decoded object (numbers as json.Number).
	Value map[string]any
	// Digest is `sha256:<hex>` of the RFC 8785 canonical arguments.
	Digest string
}

// Problems reported by [Parse]; bounded texts that never echo the input.
const (
	ProblemTooLarge  = "larger than the arguments size cap"
	ProblemNotJSON   = "not valid JSON"
	ProblemNotObject = "must be a JSON object"
	ProblemTooDeep   = "nested deeper than the arguments depth cap"
	ProblemTooMany   = "more values than the arguments cap"
)

var emptyObject = []byte("{}")

// Parse parses raw arguments; empty means `{}`. It returns a problem text
// (for INVALID_INPUT) when raw is refused.
func Parse(raw []byte, lim Limits) (Parsed, string) {
	if len(raw) == 0 {
		raw = emptyObject
	}
	if len(raw) > lim.MaxBytes {
		return Parsed{}, ProblemTooLarge
	}
	canon, err := canonical.Transform(raw)
	if err != nil {
		return Parsed{}, ProblemNotJSON
	}
	v, err := decodeCanonical(canon)
	if err != nil {
		return Parsed{}, ProblemNotJSON
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return Parsed{}, ProblemNotObject
	}
	n := 0
	if p := measure(obj, 1, &n, lim); p != "" {
		return Parsed{}, p
	}
	return Parsed{Value: obj, Digest: canonical.DigestBytes(canon)}, ""
}

func measure(v any, depth int, n *int, lim Limits) string {
	*n++
	if *n > lim.MaxValues {
		return ProblemTooMany
	}
	switch x := v.(type) {
	case map[string]any:
		if depth > lim.MaxDepth {
			return ProblemTooDeep
		}
		for _, e := range x {
			if p := measure(e, depth+1, n, lim); p != "" {
				return p
			}
		}
	case []any:
		if depth > lim.MaxDepth {
			return ProblemTooDeep
		}
		for _, e := range x {
			if p := measure(e, depth+1, n, lim); p != "" {
				return p
			}
		}
	}
	return ""
}

// Validator validates arguments against compiled input schemas, compiling
// each schema once per input-schema digest. Safe for concurrent use.
type Validator struct {
	cache    *lru.Cache[string, compiled]
	compiles atomic.Int64
	compiler schema.Compiler // platform/schema: the allow-list, the refusing loader
}

type compiled struct {
	sch *jsonschema.Schema
	err error
}

// NewValidator returns a validator keeping at most size compiled schemas.
func NewValidator(size int) *Validator {
	c, err := lru.New[string, compiled](size)
	if err != nil {
		panic(err) // only for size <= 0, a programming error
	}
	return &Validator{cache: c}
}

// Compiles is how many schemas were compiled (cache misses).
func (v *Validator) Compiles() int64 { return v.compiles.Load() }

// LoadAttempts is how many URL loads compilation asked for (each refused
// without any I/O).
func (v *Validator) LoadAttempts() int64 { return v.compiler.LoadAttempts() }

// Check validates args against the input schema with digest schemaDigest.
// schema returns that schema's JSON; it is called only on a cache miss. A
// schema that cannot be compiled fails the check (fail closed).
func (v *Validator) Check(schemaDigest string, schema func() ([]byte, error), args map[string]any) decision.ArgumentCheck {
	c, ok := v.cache.Get(schemaDigest)
	if !ok {
		raw, err := schema()
		if err != nil {
			// Not cached: the schema may be readable next time.
			return decision.ArgumentCheck{Problem: "the pinned input schema is not available", Pointer: "/"}
		}
		c = v.compile(raw)
		v.cache.Add(schemaDigest, c)
	}
	if c.err != nil {
		return decision.ArgumentCheck{Problem: "the pinned input schema cannot be used: " + bound(c.err.Error()), Pointer: "/"}
	}
	err := c.sch.Validate(args)
	if err == nil {
		return decision.ArgumentCheck{}
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return decision.ArgumentCheck{Problem: "validation failed", Pointer: "/"}
	}
	leaf := first(ve)
	return decision.ArgumentCheck{Problem: bound(leaf.ErrorKind.LocalizedString(printer)), Pointer: Pointer(leaf.InstanceLocation)}
}

var printer = message.NewPrinter(language.English)

func (v *Validator) compile(raw []byte) compiled {
	v.compiles.Add(1)
	sch, err := v.compiler.Compile(raw)
	if errors.Is(err, schema.ErrLoadRefused) {
		err = schema.ErrLoadRefused // the library's text names the URL: never echo it
	}
	return compiled{sch: sch, err: err}
}

// first returns the leaf violation with the smallest instance location
// (then the smallest keyword path), so the answer is deterministic.
func first(e *jsonschema.ValidationError) *jsonschema.ValidationError {
	var best *jsonschema.ValidationError
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			if best == nil || less(e, best) {
				best = e
			}
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(e)
	return best
}

func less(a, b *jsonschema.ValidationError) bool {
	if c := slices.Compare(a.InstanceLocation, b.InstanceLocation); c != 0 {
		return c < 0
	}
	return slices.Compare(a.ErrorKind.KeywordPath(), b.ErrorKind.KeywordPath()) < 0
}

// Pointer returns the RFC 6901 JSON pointer of an instance location.
func Pointer(loc []string) string {
	if len(loc) == 0 {
		return "/"
	}
	var b strings.Builder
	for _, tok := range loc {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(tok))
	}
	return bound(b.String())
}

const maxText = 160

// bound makes a text safe to return: printable, at most maxText bytes.
func bound(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return '?'
	}, s)
	s = strings.ReplaceAll(s, schema.ResourceURL, "schema")
	if len(s) > maxText {
		cut := maxText
		for cut > 0 && !utf8Start(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

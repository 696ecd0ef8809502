package validate

import (
	"bytes"
	"encoding/json"
	"errors"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/platform/canonical"
	"github.com/toolcrib/toolcrib/platform/schema"
)

// compiler compiles every schema of this package: the allow-list and the
// refusing loader of platform/schema.
var compiler schema.Compiler

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
	f = classify(compiler.Compile(canon))
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
	case errors.Is(err, schema.ErrUnknownDialect):
		return &Finding{Reason: discoveryv1.RunReason_RUN_REASON_UNKNOWN_DIALECT, Detail: "$schema is not 2020-12 or draft-07"}
	case errors.Is(err, schema.ErrLoadRefused) || errors.As(err, &load):
		return &Finding{Reason: discoveryv1.RunReason_RUN_REASON_NETWORK_REF, Detail: "a reference points outside the document; it was not fetched"}
	case errors.As(err, &ptr) || errors.As(err, &anc):
		return &Finding{Reason: discoveryv1.RunReason_RUN_REASON_UNRESOLVED_REF, Detail: bound(err.Error())}
	default:
		return &Finding{Reason: discoveryv1.RunReason_RUN_REASON_INVALID_SCHEMA, Detail: bound(err.Error())}
	}
}

func bound(s string) string {
	s = string(bytes.ReplaceAll([]byte(s), []byte(schema.ResourceURL), []byte("schema")))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

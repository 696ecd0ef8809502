package validate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/platform/canonical"
	"github.com/toolcrib/toolcrib/platform/ids"
	"github.com/toolcrib/toolcrib/platform/schema"
	"github.com/toolcrib/toolcrib/services/discovery/crawl"
)

// Limits bound what a tool may be. The zero value means the defaults.
type Limits struct {
	// MaxToolBytes bounds a raw tool object; 0 means 256 KiB.
	MaxToolBytes int
	// MaxSchemaBytes bounds one canonical schema; 0 means 64 KiB.
	MaxSchemaBytes int
	// MaxSchemaDepth bounds the JSON nesting of one schema; 0 means 32.
	MaxSchemaDepth int
}

func (l Limits) withDefaults() Limits {
	if l.MaxToolBytes <= 0 {
		l.MaxToolBytes = 256 << 10
	}
	if l.MaxSchemaBytes <= 0 {
		l.MaxSchemaBytes = 64 << 10
	}
	if l.MaxSchemaDepth <= 0 {
		l.MaxSchemaDepth = 32
	}
	return l
}

// Finding is one refusal.
type Finding struct {
	// Reason is the run reason.
	Reason discoveryv1.RunReason
	// Tool names the tool (its name, or `#<index>` when it has none).
	Tool string
	// Detail explains it.
	Detail string
}

func (f *Finding) Error() string { return f.Reason.String() + ": " + f.Tool + ": " + f.Detail }

// Flag is a finding that does not refuse the catalog.
type Flag struct {
	// Tool is the tool name.
	Tool string
	// Flag is the code, e.g. DESCRIPTION_INSTRUCTIONS.
	Flag string
	// Detail is what matched (quoted, truncated); never followed.
	Detail string
}

// Tool is what validation derived from one tool.
type Tool struct {
	// Name, Title and Description are the members as sent.
	Name, Title, Description string
	// InputSchemaDigest and OutputSchemaDigest are `sha256:<hex>` of the
	// canonical schemas; the output digest is empty when there is none.
	InputSchemaDigest, OutputSchemaDigest string
	// Dialect is the input schema's pinned dialect.
	Dialect string
	// Annotations are the annotations as sent; nil when none.
	Annotations *catalogv1.ToolAnnotations
	// Flags are the codes of the tool's flags.
	Flags []string

	docs []any // decoded schemas, for the flag heuristics
}

// Report is the outcome of validating a catalog.
type Report struct {
	// Refusal is the first refusal; nil when the catalog is accepted.
	Refusal *Finding
	// Tools are the derived facts, in input order (only complete when
	// Refusal is nil).
	Tools []Tool
	// Flags are every flag, in tool order.
	Flags []Flag
}

// Catalog validates tools in order and stops at the first refusal. The
// per-tool checks, the flag heuristics included, run on every CPU; the
// order of findings is the sequential one described in the package doc.
func Catalog(tools []crawl.Tool, l Limits) *Report {
	l = l.withDefaults()
	type result struct {
		tool  Tool
		f     *Finding
		flags []Flag
	}
	results := make([]result, len(tools))
	checkRange := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			r := &results[i]
			if r.f = check(&r.tool, tools[i], i, l); r.f == nil {
				r.flags = toolFlags(&r.tool)
			}
			r.tool.docs = nil
		}
	}
	if workers := min(runtime.GOMAXPROCS(0), max(1, len(tools)/256)); workers == 1 {
		checkRange(0, len(tools))
	} else {
		var wg sync.WaitGroup
		chunk := (len(tools) + workers - 1) / workers
		for w := range workers {
			lo, hi := w*chunk, min((w+1)*chunk, len(tools))
			wg.Go(func() { checkRange(lo, hi) })
		}
		wg.Wait()
	}

	rep := &Report{Tools: make([]Tool, 0, len(tools))}
	names := make(map[string]int, len(tools))
	for i := range results {
		r := &results[i]
		vt, f := &r.tool, r.f
		// Steps 1 and 2 come before the duplicate check (step 3).
		if f != nil && (f.Reason == discoveryv1.RunReason_RUN_REASON_MALFORMED_TOOL || f.Reason == discoveryv1.RunReason_RUN_REASON_INVALID_TOOL_NAME) {
			rep.Refusal = f
			return rep
		}
		if j, dup := names[vt.Name]; dup {
			rep.Refusal = &Finding{Reason: discoveryv1.RunReason_RUN_REASON_DUPLICATE_TOOL_NAME, Tool: vt.Name,
				Detail: fmt.Sprintf("tools #%d and #%d share the name", j, i)}
			return rep
		}
		names[vt.Name] = i
		if f != nil {
			rep.Refusal = f
			return rep
		}
		for _, fl := range r.flags {
			rep.Flags = append(rep.Flags, fl)
			vt.Flags = append(vt.Flags, fl.Flag)
		}
		rep.Tools = append(rep.Tools, *vt)
	}
	return rep
}

// check runs every per-tool step except the duplicate check, deriving into
// vt (tool i of the catalog). On a refusal vt still carries the name when
// one was read, and the finding names the tool by it (by `#<i>` before).
func check(vt *Tool, t crawl.Tool, i int, l Limits) *Finding {
	named := false
	label := func() string {
		if named {
			return vt.Name
		}
		return fmt.Sprintf("#%d", i)
	}
	refuse := func(reason discoveryv1.RunReason, format string, args ...any) *Finding {
		return &Finding{Reason: reason, Tool: label(), Detail: fmt.Sprintf(format, args...)}
	}
	if t.Malformed != "" {
		return refuse(discoveryv1.RunReason_RUN_REASON_MALFORMED_TOOL, "%s", t.Malformed)
	}
	m, err := decodeMembers(t.Canonical)
	if err != nil {
		return refuse(discoveryv1.RunReason_RUN_REASON_MALFORMED_TOOL, "%v", err)
	}
	if _, ok := m["name"]; !ok || stringMember(m, "name", &vt.Name) != nil {
		return refuse(discoveryv1.RunReason_RUN_REASON_MALFORMED_TOOL, "no string name")
	}
	named = true
	if err := stringMember(m, "title", &vt.Title); err != nil {
		return refuse(discoveryv1.RunReason_RUN_REASON_MALFORMED_TOOL, "title is not a string")
	}
	if err := stringMember(m, "description", &vt.Description); err != nil {
		return refuse(discoveryv1.RunReason_RUN_REASON_MALFORMED_TOOL, "description is not a string")
	}
	if a, ok := m["annotations"]; ok {
		ann, err := annotations(a)
		if err != nil {
			return refuse(discoveryv1.RunReason_RUN_REASON_MALFORMED_TOOL, "annotations: %v", err)
		}
		vt.Annotations = ann
	}
	var icons []json.RawMessage
	if raw, ok := m["icons"]; ok {
		if err := json.Unmarshal(raw, &icons); err != nil {
			return refuse(discoveryv1.RunReason_RUN_REASON_MALFORMED_TOOL, "icons is not an array")
		}
	}
	if !ids.ValidToolName(vt.Name) {
		return refuse(discoveryv1.RunReason_RUN_REASON_INVALID_TOOL_NAME, "name %s is not [A-Za-z0-9_.-]{1,128}", quote(vt.Name))
	}
	if len(t.Raw) > l.MaxToolBytes {
		return refuse(discoveryv1.RunReason_RUN_REASON_SCHEMA_TOO_LARGE, "the tool is %d bytes, over the limit of %d", len(t.Raw), l.MaxToolBytes)
	}
	in, ok := m["inputSchema"]
	if !ok {
		return refuse(discoveryv1.RunReason_RUN_REASON_INVALID_SCHEMA, "no inputSchema")
	}
	dialect, inDoc, f := checkSchema(in, l)
	if f != nil {
		f.Tool, f.Detail = label(), "inputSchema: "+f.Detail
		return f
	}
	vt.Dialect = dialect
	vt.InputSchemaDigest = canonical.DigestBytes(in)
	vt.docs = append(vt.docs, inDoc)
	if out, ok := m["outputSchema"]; ok {
		_, outDoc, f := checkSchema(out, l)
		if f != nil {
			f.Tool, f.Detail = label(), "outputSchema: "+f.Detail
			return f
		}
		vt.OutputSchemaDigest = canonical.DigestBytes(out)
		vt.docs = append(vt.docs, outDoc)
	}
	for k, raw := range icons {
		var icon struct {
			Src *string `json:"src"`
		}
		if err := json.Unmarshal(raw, &icon); err != nil || icon.Src == nil {
			return refuse(discoveryv1.RunReason_RUN_REASON_INVALID_ICON, "icon %d has no string src", k)
		}
		u, err := url.Parse(*icon.Src)
		if err != nil || (!strings.EqualFold(u.Scheme, "https") && !strings.EqualFold(u.Scheme, "data")) {
			return refuse(discoveryv1.RunReason_RUN_REASON_INVALID_ICON, "icon %d: scheme of %s is not https or data", k, quote(*icon.Src))
		}
	}
	return nil
}

// stringMember reads an optional string member as json.Unmarshal into
// dst would (TestStringMemberMatchesEncodingJSON, FuzzStringMember): an
// absent member or `null` leaves dst as it is, a value of another kind is
// an error, a string is decoded by [decoder.str] (invalid UTF-8 and lone
// surrogates become U+FFFD). Each tool's name, title and description are
// read here on every commit; json.Unmarshal took a quarter of the per-tool
// checks' CPU on 100,000 tools.
func stringMember(m map[string]json.RawMessage, key string, dst *string) error {
	raw, ok := m[key]
	if !ok {
		return nil
	}
	d := decoder{b: raw}
	d.space()
	if d.i >= len(d.b) {
		return errDecodeEnd
	}
	first := d.b[d.i]
	var s string
	var err error
	switch first {
	case 'n':
		err = d.literal("null")
	case '"':
		s, err = d.str()
	default:
		err = d.skip(0)
	}
	if err != nil {
		return err
	}
	d.space()
	if d.i != len(d.b) {
		return d.errorf("data after the value")
	}
	switch first {
	case 'n':
		return nil
	case '"':
		*dst = s
		return nil
	}
	return errors.New("the JSON value is not a string")
}

func annotations(raw json.RawMessage) (*catalogv1.ToolAnnotations, error) {
	var a struct {
		ReadOnly    *bool   `json:"readOnlyHint"`
		Destructive *bool   `json:"destructiveHint"`
		Idempotent  *bool   `json:"idempotentHint"`
		OpenWorld   *bool   `json:"openWorldHint"`
		Title       *string `json:"title"`
	}
	if !bytes.HasPrefix(raw, []byte("{")) {
		return nil, fmt.Errorf("not an object")
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, err
	}
	out := &catalogv1.ToolAnnotations{ReadOnlyHint: a.ReadOnly, DestructiveHint: a.Destructive, IdempotentHint: a.Idempotent, OpenWorldHint: a.OpenWorld}
	if a.Title != nil {
		out.Title = *a.Title
	}
	return out, nil
}

// quote bounds and quotes untrusted text for a detail.
func quote(s string) string {
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// Schema checks one canonical schema (see the package doc, step 5) and
// returns the dialect it is pinned to.
func Schema(canon json.RawMessage, l Limits) (string, *Finding) {
	d, _, f := checkSchema(canon, l.withDefaults())
	return d, f
}

// checkSchema is Schema that also returns the decoded document.
func checkSchema(canon json.RawMessage, l Limits) (string, any, *Finding) {
	refuse := func(reason discoveryv1.RunReason, format string, args ...any) (string, any, *Finding) {
		return "", nil, &Finding{Reason: reason, Detail: fmt.Sprintf(format, args...)}
	}
	if len(canon) > l.MaxSchemaBytes {
		return refuse(discoveryv1.RunReason_RUN_REASON_SCHEMA_TOO_LARGE, "%d bytes, over the limit of %d", len(canon), l.MaxSchemaBytes)
	}
	if d := depth(canon); d > l.MaxSchemaDepth {
		return refuse(discoveryv1.RunReason_RUN_REASON_SCHEMA_TOO_DEEP, "nested %d deep, over the limit of %d", d, l.MaxSchemaDepth)
	}
	doc, err := decodeJSON(canon)
	if err != nil {
		return refuse(discoveryv1.RunReason_RUN_REASON_INVALID_SCHEMA, "not JSON: %v", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return refuse(discoveryv1.RunReason_RUN_REASON_INVALID_SCHEMA, "not a JSON object")
	}
	dialect := schema.Draft2020
	if s, ok := obj["$schema"]; ok {
		str, _ := s.(string)
		d, ok := schema.Dialect(str)
		if !ok {
			return refuse(discoveryv1.RunReason_RUN_REASON_UNKNOWN_DIALECT, "$schema %s is not 2020-12 or draft-07", quote(fmt.Sprint(s)))
		}
		dialect = d
	}
	// The walk in map order finds whether there is any finding and any
	// reference; only a schema with a finding is walked again in key order
	// with paths, so the finding named is the first in key order.
	refs := refWalk{unordered: true}
	refs.walk(obj, "")
	if refs.finding != nil {
		refs = refWalk{}
		refs.walk(obj, "")
		return "", nil, refs.finding
	}
	if obj["type"] != "object" {
		return refuse(discoveryv1.RunReason_RUN_REASON_INVALID_SCHEMA, `the schema is not "type": "object"`)
	}
	if !refs.references && simple(obj, true) {
		return dialect, doc, nil
	}
	if f := compileVerdict(canon, dialect); f != nil {
		return "", nil, f
	}
	return dialect, doc, nil
}

// depth returns the deepest nesting of arrays and objects in valid JSON.
func depth(b []byte) int {
	d, maxD := 0, 0
	inStr, esc := false, false
	for _, c := range b {
		switch {
		case inStr:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == '{' || c == '[':
			d++
			maxD = max(maxD, d)
		case c == '}' || c == ']':
			d--
		}
	}
	return maxD
}

// dataKeywords hold instance data, not subschemas: a `$ref` inside them is
// a value, not a reference.
var dataKeywords = map[string]bool{"enum": true, "const": true, "default": true, "examples": true, "example": true}

// schemaMaps are keywords whose value maps names to subschemas;
// schemaArrays hold arrays of subschemas.
var (
	schemaMaps   = map[string]bool{"properties": true, "patternProperties": true, "$defs": true, "definitions": true, "dependentSchemas": true, "dependencies": true}
	schemaArrays = map[string]bool{"allOf": true, "anyOf": true, "oneOf": true, "prefixItems": true, "items": true}
)

// refWalk looks for references and nested dialects, in sorted key order so
// the first finding is deterministic. An unordered walk visits members in
// map order and builds no paths: it answers whether there is a finding
// (its detail then names no path) and, when there is none, the same
// references as the ordered walk, which visits the same members.
type refWalk struct {
	finding    *Finding
	references bool // any $ref, $dynamicRef, $recursiveRef, $id or $anchor
	unordered  bool
}

// at is the path of member or element k under path; an unordered walk
// builds none ("/" for every path below the root).
func (w *refWalk) at(path, k string) string {
	if w.unordered {
		return "/"
	}
	return path + "/" + k
}

// memberNames returns m's member names, in key order when sorted, in map
// order otherwise (a walk that only asks whether anything is there).
func memberNames(m map[string]any, sorted bool) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	if sorted {
		sort.Strings(names)
	}
	return names
}

// walk visits a schema (an object or a boolean).
func (w *refWalk) walk(v any, path string) {
	obj, ok := v.(map[string]any)
	if !ok {
		return
	}
	for _, k := range memberNames(obj, !w.unordered) {
		if w.finding != nil {
			return
		}
		val := obj[k]
		p := w.at(path, k)
		switch {
		case k == "$ref" || k == "$dynamicRef" || k == "$recursiveRef":
			w.references = true
			s, ok := val.(string)
			if !ok {
				w.finding = &Finding{Reason: discoveryv1.RunReason_RUN_REASON_INVALID_SCHEMA, Detail: p + " is not a string"}
				return
			}
			if !strings.HasPrefix(s, "#") {
				w.finding = &Finding{Reason: discoveryv1.RunReason_RUN_REASON_NETWORK_REF,
					Detail: fmt.Sprintf("%s = %s points outside the document; it was not fetched", p, quote(s))}
				return
			}
		case k == "$id" || k == "$anchor" || k == "$dynamicAnchor" || k == "$recursiveAnchor" || k == "id":
			w.references = true
		case k == "$schema":
			if path != "" {
				s, _ := val.(string)
				if _, ok := schema.Dialect(s); !ok {
					w.finding = &Finding{Reason: discoveryv1.RunReason_RUN_REASON_UNKNOWN_DIALECT,
						Detail: fmt.Sprintf("%s = %s is not 2020-12 or draft-07", p, quote(fmt.Sprint(val)))}
					return
				}
				w.references = true // an embedded resource: let the compiler judge it
			}
		case dataKeywords[k]:
		case schemaMaps[k]:
			if m, ok := val.(map[string]any); ok {
				for _, name := range memberNames(m, !w.unordered) {
					w.walk(m[name], w.at(p, name))
				}
			}
		case schemaArrays[k]:
			if a, ok := val.([]any); ok {
				for i, e := range a {
					w.walk(e, w.at(p, strconv.Itoa(i)))
				}
			} else {
				w.walk(val, p)
			}
		default:
			// Single subschemas (not, if, additionalProperties, …) and
			// unknown keywords: look inside objects, to be safe.
			switch x := val.(type) {
			case map[string]any:
				w.walk(x, p)
			case []any:
				for i, e := range x {
					w.walk(e, w.at(p, strconv.Itoa(i)))
				}
			}
		}
	}
}

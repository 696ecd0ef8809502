package oracle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/platform/canonical"
)

// parsedTool is one tool as the checks see it.
type parsedTool struct {
	index   int
	name    string
	members map[string]json.RawMessage
	canon   []byte
	schemas []parsedSchema // inputSchema, then outputSchema when present
}

type parsedSchema struct {
	member string // "inputSchema" or "outputSchema"
	raw    json.RawMessage
	value  any // decoded with UseNumber
}

// validate returns the reason a whole catalog is quarantined, or
// UNSPECIFIED when it passes: the first tool (in page order) that fails a
// check decides, with the first check it fails (see the package doc).
func validate(tools []fixture.Tool, lim Limits) (discoveryv1.RunReason, string) {
	first := map[string]int{}
	for i, t := range tools {
		p, why := parse(i, t.JSON())
		if why != "" {
			return discoveryv1.RunReason_RUN_REASON_MALFORMED_TOOL, fmt.Sprintf("tool %d: %s", i, why)
		}
		refuse := func(reason discoveryv1.RunReason, why string) (discoveryv1.RunReason, string) {
			return reason, fmt.Sprintf("tool %d (%q): %s", i, p.name, why)
		}
		if why := checkName(p); why != "" {
			return refuse(discoveryv1.RunReason_RUN_REASON_INVALID_TOOL_NAME, why)
		}
		if j, dup := first[p.name]; dup {
			return refuse(discoveryv1.RunReason_RUN_REASON_DUPLICATE_TOOL_NAME, fmt.Sprintf("tool %d has the same name", j))
		}
		first[p.name] = i
		if lim.MaxToolBytes > 0 && len(t.JSON()) > lim.MaxToolBytes {
			return refuse(discoveryv1.RunReason_RUN_REASON_SCHEMA_TOO_LARGE,
				fmt.Sprintf("the tool is %d bytes as served, limit %d", len(t.JSON()), lim.MaxToolBytes))
		}
		if _, ok := p.members["inputSchema"]; !ok {
			return refuse(discoveryv1.RunReason_RUN_REASON_INVALID_SCHEMA, "no inputSchema")
		}
		for _, sc := range p.schemas {
			for _, c := range schemaChecks {
				if why := c.fails(sc, lim); why != "" {
					return refuse(c.reason, sc.member+" "+why)
				}
			}
		}
		if why := checkIcons(p); why != "" {
			return refuse(discoveryv1.RunReason_RUN_REASON_INVALID_ICON, why)
		}
	}
	return discoveryv1.RunReason_RUN_REASON_UNSPECIFIED, ""
}

// schemaCheck is one rule for one schema.
type schemaCheck struct {
	reason discoveryv1.RunReason
	fails  func(s parsedSchema, lim Limits) string // "" when the schema passes
}

// schemaChecks are the rules for each schema of a tool, in the order of
// the package doc.
var schemaChecks = []schemaCheck{
	{discoveryv1.RunReason_RUN_REASON_SCHEMA_TOO_LARGE, checkSize},
	{discoveryv1.RunReason_RUN_REASON_SCHEMA_TOO_DEEP, checkDepth},
	{discoveryv1.RunReason_RUN_REASON_INVALID_SCHEMA, checkIsObject},
	{discoveryv1.RunReason_RUN_REASON_UNKNOWN_DIALECT, checkDialect},
	{discoveryv1.RunReason_RUN_REASON_NETWORK_REF, checkNetworkRefs},
	{discoveryv1.RunReason_RUN_REASON_INVALID_SCHEMA, checkObjectType},
	{discoveryv1.RunReason_RUN_REASON_UNRESOLVED_REF, checkLocalRefs},
}

func parse(i int, raw json.RawMessage) (*parsedTool, string) {
	canon, err := canonical.Transform(raw)
	if err != nil {
		return nil, "not I-JSON: " + err.Error()
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil, "not a JSON object"
	}
	p := &parsedTool{index: i, canon: canon}
	if err := json.Unmarshal(raw, &p.members); err != nil {
		return nil, "not a JSON object: " + err.Error()
	}
	name, ok := p.members["name"]
	if !ok || len(name) == 0 || name[0] != '"' || json.Unmarshal(name, &p.name) != nil {
		return nil, "no string name"
	}
	for _, member := range []string{"inputSchema", "outputSchema"} {
		raw, ok := p.members[member]
		if !ok {
			continue
		}
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var v any
		_ = d.Decode(&v) // valid JSON: canonical accepted the whole tool
		p.schemas = append(p.schemas, parsedSchema{member: member, raw: raw, value: v})
	}
	return p, ""
}

func checkName(t *parsedTool) string {
	if len(t.name) < 1 || len(t.name) > 128 {
		return fmt.Sprintf("name is %d bytes long, want 1 to 128", len(t.name))
	}
	for _, c := range []byte(t.name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return fmt.Sprintf("name has byte %q outside [A-Za-z0-9_.-]", c)
		}
	}
	return ""
}

func checkIsObject(s parsedSchema, _ Limits) string {
	if _, ok := s.value.(map[string]any); !ok {
		return "is not a JSON object"
	}
	return ""
}

func checkObjectType(s parsedSchema, _ Limits) string {
	if typ, _ := s.value.(map[string]any)["type"].(string); typ != "object" {
		return `has no "type": "object"`
	}
	return ""
}

// Dialects toolcrib pins schemas to, in the normalized form the dialect
// check compares against.
var allowedDialects = map[string]bool{
	"https://json-schema.org/draft/2020-12/schema": true,
	"https://json-schema.org/draft-07/schema":      true,
}

func checkDialect(s parsedSchema, _ Limits) string {
	var bad string
	subschemas(s.value, func(obj map[string]any) bool {
		v, ok := obj["$schema"]
		if !ok {
			return true
		}
		name, isString := v.(string)
		norm := strings.TrimSuffix(name, "#")
		if rest, ok := strings.CutPrefix(norm, "http://"); ok {
			norm = "https://" + rest
		}
		if !isString || !allowedDialects[norm] {
			bad = fmt.Sprintf("$schema %v is not 2020-12 or draft-07", v)
			return false
		}
		return true
	})
	return bad
}

// dataKeywords hold instances, not schemas: nothing in them is a keyword.
var dataKeywords = map[string]bool{"enum": true, "const": true, "default": true, "examples": true, "example": true}

// nameMaps are keywords whose value maps names (not keywords) to schemas.
var nameMaps = map[string]bool{"properties": true, "patternProperties": true, "$defs": true, "definitions": true,
	"dependentSchemas": true, "dependencies": true}

// subschemas calls fn for the schema v and every object that may be a
// schema inside it: everything but the values of data keywords, with the
// members of name maps taken as schemas whatever their names. It stops
// when fn returns false.
func subschemas(v any, fn func(map[string]any) bool) bool {
	obj, ok := v.(map[string]any)
	if !ok {
		return true
	}
	if !fn(obj) {
		return false
	}
	for k, m := range obj {
		switch {
		case dataKeywords[k]:
		case nameMaps[k]:
			if named, ok := m.(map[string]any); ok {
				for _, sub := range named {
					if !inside(sub, fn) {
						return false
					}
				}
			}
		default:
			if !inside(m, fn) {
				return false
			}
		}
	}
	return true
}

// inside visits what may be schemas in a member's value.
func inside(v any, fn func(map[string]any) bool) bool {
	switch v := v.(type) {
	case map[string]any:
		return subschemas(v, fn)
	case []any:
		for _, e := range v {
			if !inside(e, fn) {
				return false
			}
		}
	}
	return true
}

// refKeywords are the keywords whose value is a reference.
var refKeywords = []string{"$ref", "$dynamicRef", "$recursiveRef"}

// refs returns every string reference in a schema's subschemas.
func refs(v any) []string {
	var out []string
	subschemas(v, func(obj map[string]any) bool {
		for _, k := range refKeywords {
			if s, ok := obj[k].(string); ok {
				out = append(out, s)
			}
		}
		return true
	})
	return out
}

func checkNetworkRefs(s parsedSchema, _ Limits) string {
	for _, ref := range refs(s.value) {
		if !strings.HasPrefix(ref, "#") {
			return fmt.Sprintf("refers to %q outside itself", ref)
		}
	}
	return ""
}

func checkLocalRefs(s parsedSchema, _ Limits) string {
	for _, ref := range refs(s.value) {
		if !resolves(s.value, ref[1:]) {
			return fmt.Sprintf("reference %q does not resolve", ref)
		}
	}
	return ""
}

// resolves reports whether fragment (after the `#`) names something in
// root: the root itself, a JSON pointer, or an anchor.
func resolves(root any, fragment string) bool {
	frag, err := url.PathUnescape(fragment)
	if err != nil {
		return false
	}
	if frag == "" {
		return true
	}
	if !strings.HasPrefix(frag, "/") {
		return hasAnchor(root, frag)
	}
	cur := root
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[tok]
			if !ok {
				return false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) || strconv.Itoa(i) != tok {
				return false
			}
			cur = v[i]
		default:
			return false
		}
	}
	return true
}

func hasAnchor(v any, name string) bool {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range []string{"$anchor", "$dynamicAnchor"} {
			if s, ok := v[k].(string); ok && s == name {
				return true
			}
		}
		for _, m := range v {
			if hasAnchor(m, name) {
				return true
			}
		}
	case []any:
		for _, m := range v {
			if hasAnchor(m, name) {
				return true
			}
		}
	}
	return false
}

func checkSize(s parsedSchema, lim Limits) string {
	if lim.MaxSchemaBytes <= 0 {
		return ""
	}
	c, _ := canonical.Transform(s.raw) // part of a tool canonical accepted
	if len(c) > lim.MaxSchemaBytes {
		return fmt.Sprintf("is %d canonical bytes, limit %d", len(c), lim.MaxSchemaBytes)
	}
	return ""
}

// depth is 0 for a scalar and one more than the deepest member for an
// object or array.
func depth(v any) int {
	d := 0
	switch v := v.(type) {
	case map[string]any:
		for _, m := range v {
			d = max(d, depth(m))
		}
		return d + 1
	case []any:
		for _, m := range v {
			d = max(d, depth(m))
		}
		return d + 1
	}
	return 0
}

func checkDepth(s parsedSchema, lim Limits) string {
	if lim.MaxSchemaDepth <= 0 {
		return ""
	}
	if d := depth(s.value); d > lim.MaxSchemaDepth {
		return fmt.Sprintf("is %d deep, limit %d", d, lim.MaxSchemaDepth)
	}
	return ""
}

func checkIcons(t *parsedTool) string {
	raw, ok := t.members["icons"]
	if !ok {
		return ""
	}
	var icons []json.RawMessage
	if err := json.Unmarshal(raw, &icons); err != nil || len(raw) == 0 || raw[0] != '[' {
		return "icons is not an array"
	}
	for i, icon := range icons {
		var obj map[string]json.RawMessage
		if len(icon) == 0 || icon[0] != '{' || json.Unmarshal(icon, &obj) != nil {
			return fmt.Sprintf("icon %d is not an object", i)
		}
		var src string
		if s, ok := obj["src"]; !ok || len(s) == 0 || s[0] != '"' || json.Unmarshal(s, &src) != nil {
			return fmt.Sprintf("icon %d has no string src", i)
		}
		scheme, _, found := strings.Cut(src, ":")
		if scheme = strings.ToLower(scheme); !found || (scheme != "https" && scheme != "data") {
			return fmt.Sprintf("icon %d src %q is neither https nor data", i, src)
		}
	}
	return ""
}

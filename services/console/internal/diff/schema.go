package diff

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Kind is what happened to a schema element.
type Kind string

// Change kinds.
const (
	// Added: only in the new schema.
	Added Kind = "added"
	// Removed: only in the old schema.
	Removed Kind = "removed"
	// Changed: in both, with another value.
	Changed Kind = "changed"
)

// Change is one structural difference between two schemas.
type Change struct {
	// Path locates the element: `properties.shipment_id`,
	// `properties.items.items.properties.sku`, or `` for the root.
	Path string
	// What names the element changed: `property`, `required`, `type`, or
	// the keyword (`description`, `enum`, `minimum`, …).
	What string
	// Kind is added, removed or changed.
	Kind Kind
	// Old and New are the compact JSON of the element before and after;
	// empty on the side where it is absent. Long values are cut.
	Old, New string
}

// MaxSchemaChanges and MaxSchemaDepth bound [Schema]'s work on hostile
// input: it stops after that many changes (Truncated set) and does not
// descend deeper than that many nested schemas.
const (
	MaxSchemaChanges = 500
	MaxSchemaDepth   = 32
	maxValueBytes    = 300
)

// SchemaDiff is the result of [Schema].
type SchemaDiff struct {
	Changes []Change
	// Truncated: more changes than MaxSchemaChanges, or nesting deeper
	// than MaxSchemaDepth, were not listed.
	Truncated bool
}

// Schema compares two JSON Schemas (raw JSON; empty or `null` means no
// schema) structurally: properties added and removed, each property's
// schema compared recursively (also under `items`, `additionalProperties`,
// `$defs`), required names added and removed, `type` changed, and any
// other keyword changed as a whole. Changes come in path order. A schema
// that is not valid JSON is compared as an opaque value.
func Schema(old, new []byte) SchemaDiff {
	var d SchemaDiff
	ov, oerr := decode(old)
	nv, nerr := decode(new)
	if oerr != nil || nerr != nil {
		if string(old) != string(new) {
			d.add(Change{What: "schema", Kind: Changed, Old: cut(string(old)), New: cut(string(new))})
		}
		return d
	}
	d.walk("", ov, nv, 0)
	return d
}

func decode(b []byte) (any, error) {
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil, nil
	}
	var v any
	err := json.Unmarshal(b, &v)
	return v, err
}

func (d *SchemaDiff) add(c Change) bool {
	if len(d.Changes) >= MaxSchemaChanges {
		d.Truncated = true
		return false
	}
	d.Changes = append(d.Changes, c)
	return true
}

// nested are the keywords whose value is a map of name → schema.
var nested = []string{"properties", "$defs", "definitions", "patternProperties"}

// single are the keywords whose value is one schema.
var single = []string{"items", "additionalProperties", "not", "contains", "propertyNames"}

func (d *SchemaDiff) walk(path string, old, new any, depth int) {
	if depth > MaxSchemaDepth {
		if !jsonEqual(old, new) {
			d.Truncated = true
		}
		return
	}
	om, ook := old.(map[string]any)
	nm, nok := new.(map[string]any)
	if !ook || !nok {
		if !jsonEqual(old, new) {
			d.add(change(path, "schema", old, new))
		}
		return
	}
	keys := map[string]bool{}
	for k := range om {
		keys[k] = true
	}
	for k := range nm {
		keys[k] = true
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		ov, inOld := om[k]
		nv, inNew := nm[k]
		switch {
		case slices.Contains(nested, k):
			d.members(join(path, k), asMap(ov), asMap(nv), depth)
		case slices.Contains(single, k) && (isMap(ov) || isMap(nv)):
			d.walk(join(path, k), ov, nv, depth+1)
		case k == "required":
			d.required(path, ov, nv)
		case !inOld:
			d.add(change(path, k, nil, nv))
		case !inNew:
			d.add(change(path, k, ov, nil))
		case !jsonEqual(ov, nv):
			d.add(change(path, k, ov, nv))
		}
		if d.Truncated && len(d.Changes) >= MaxSchemaChanges {
			return
		}
	}
}

// members compares a name → schema map (properties, $defs).
func (d *SchemaDiff) members(path string, old, new map[string]any, depth int) {
	names := map[string]bool{}
	for k := range old {
		names[k] = true
	}
	for k := range new {
		names[k] = true
	}
	sorted := make([]string, 0, len(names))
	for k := range names {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	what := "property"
	if !strings.HasSuffix(path, "properties") {
		what = "definition"
	}
	for _, k := range sorted {
		ov, inOld := old[k]
		nv, inNew := new[k]
		p := join(path, k)
		switch {
		case !inOld:
			d.add(change(p, what, nil, nv))
		case !inNew:
			d.add(change(p, what, ov, nil))
		default:
			d.walk(p, ov, nv, depth+1)
		}
	}
}

// required reports names added to and removed from `required`.
func (d *SchemaDiff) required(path string, old, new any) {
	os, ns := strs(old), strs(new)
	for _, n := range ns {
		if !slices.Contains(os, n) {
			d.add(Change{Path: path, What: "required", Kind: Added, New: cut(n)})
		}
	}
	for _, o := range os {
		if !slices.Contains(ns, o) {
			d.add(Change{Path: path, What: "required", Kind: Removed, Old: cut(o)})
		}
	}
}

func change(path, what string, old, new any) Change {
	c := Change{Path: path, What: what, Kind: Changed}
	if old == nil {
		c.Kind = Added
	} else {
		c.Old = compact(old)
	}
	if new == nil {
		c.Kind = Removed
	} else {
		c.New = compact(new)
	}
	return c
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func isMap(v any) bool {
	_, ok := v.(map[string]any)
	return ok
}

func strs(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		} else {
			out = append(out, compact(x))
		}
	}
	return out
}

// jsonEqual compares whole values (never the cut form).
func jsonEqual(a, b any) bool {
	ab, aerr := json.Marshal(a)
	bb, berr := json.Marshal(b)
	return aerr == nil && berr == nil && string(ab) == string(bb)
}

// compact is v as compact JSON (map keys sorted by encoding/json), cut to
// a bounded length.
func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return cut(string(b))
}

func cut(s string) string {
	if len(s) <= maxValueBytes {
		return s
	}
	i := maxValueBytes
	for i > 0 && !utf8Start(s[i]) {
		i--
	}
	return s[:i] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

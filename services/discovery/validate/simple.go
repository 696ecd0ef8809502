package validate

import (
	"encoding/json"
	"math"
	"regexp"
	"strconv"
)

// simple reports whether a decoded schema (numbers as json.Number) uses only
// plain keywords whose values have the types both the 2020-12 and draft-07
// metaschemas require, so it is valid without compiling. It answers false
// whenever it is unsure; the compiler then decides. References, `$id` and
// anchors never reach it (Schema sends those to the compiler).
func simple(v any, root bool) bool {
	switch s := v.(type) {
	case bool:
		return true
	case map[string]any:
		for k, val := range s {
			if !simpleKeyword(k, val, root) {
				return false
			}
		}
		return true
	}
	return false
}

var jsonTypes = map[string]bool{"object": true, "array": true, "string": true, "number": true, "integer": true, "boolean": true, "null": true}

func simpleKeyword(k string, v any, root bool) bool {
	switch k {
	case "$schema":
		return root // already checked against the allow-list
	case "type":
		switch t := v.(type) {
		case string:
			return jsonTypes[t]
		case []any:
			seen := map[string]bool{}
			for _, e := range t {
				s, ok := e.(string)
				if !ok || !jsonTypes[s] || seen[s] {
					return false
				}
				seen[s] = true
			}
			return len(t) > 0
		}
		return false
	case "properties":
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		for _, sub := range m {
			if !simple(sub, false) {
				return false
			}
		}
		return true
	case "items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else":
		return simple(v, false)
	case "allOf", "anyOf", "oneOf":
		a, ok := v.([]any)
		if !ok || len(a) == 0 {
			return false
		}
		for _, sub := range a {
			if !simple(sub, false) {
				return false
			}
		}
		return true
	case "required":
		a, ok := v.([]any)
		if !ok {
			return false
		}
		seen := map[string]bool{}
		for _, e := range a {
			s, ok := e.(string)
			if !ok || seen[s] {
				return false
			}
			seen[s] = true
		}
		return true
	case "enum", "examples":
		_, ok := v.([]any)
		return ok
	case "const", "default":
		return true
	case "title", "description", "$comment", "format", "contentEncoding", "contentMediaType":
		_, ok := v.(string)
		return ok
	case "deprecated", "readOnly", "writeOnly", "uniqueItems":
		_, ok := v.(bool)
		return ok
	case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
		_, ok := number(v)
		return ok
	case "multipleOf":
		f, ok := number(v)
		return ok && f > 0
	case "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		i, err := strconv.ParseInt(string(n), 10, 64)
		return err == nil && i >= 0
	case "pattern":
		s, ok := v.(string)
		if !ok {
			return false
		}
		_, err := regexp.Compile(s)
		return err == nil
	}
	return false
}

func number(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil && !math.IsInf(f, 0) && !math.IsNaN(f)
}

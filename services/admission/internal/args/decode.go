package args

import (
	"encoding/json"
	"errors"
	"strconv"
)

// errCanonical is returned by decodeCanonical for bytes that are not the
// canonical (RFC 8785) form it expects.
var errCanonical = errors.New("args: not canonical JSON")

// decodeCanonical decodes the canonical form of one JSON value (no
// whitespace; strings escape only `"`, `\` and control characters) into
// the values jsonschema validates: map[string]any, []any, string,
// json.Number, bool and nil. It replaces encoding/json's reflection on
// the hot path, where it was the largest cost of a cached Check.
func decodeCanonical(b []byte) (any, error) {
	d := decoder{in: b}
	v, err := d.value()
	if err == nil && d.pos != len(d.in) {
		err = errCanonical
	}
	return v, err
}

type decoder struct {
	in  []byte
	pos int
}

func (d *decoder) value() (any, error) {
	if d.pos >= len(d.in) {
		return nil, errCanonical
	}
	switch c := d.in[d.pos]; {
	case c == '{':
		d.pos++
		m := map[string]any{}
		if d.peek('}') {
			return m, nil
		}
		for {
			if d.pos >= len(d.in) || d.in[d.pos] != '"' {
				return nil, errCanonical
			}
			k, err := d.str()
			if err != nil {
				return nil, err
			}
			if !d.peek(':') {
				return nil, errCanonical
			}
			v, err := d.value()
			if err != nil {
				return nil, err
			}
			m[k] = v
			if d.peek('}') {
				return m, nil
			}
			if !d.peek(',') {
				return nil, errCanonical
			}
		}
	case c == '[':
		d.pos++
		a := []any{}
		if d.peek(']') {
			return a, nil
		}
		for {
			v, err := d.value()
			if err != nil {
				return nil, err
			}
			a = append(a, v)
			if d.peek(']') {
				return a, nil
			}
			if !d.peek(',') {
				return nil, errCanonical
			}
		}
	case c == '"':
		return d.str()
	case d.word("true"):
		return true, nil
	case d.word("false"):
		return false, nil
	case d.word("null"):
		return nil, nil
	case c == '-' || (c >= '0' && c <= '9'):
		start := d.pos
		for d.pos < len(d.in) && isNumberByte(d.in[d.pos]) {
			d.pos++
		}
		return json.Number(d.in[start:d.pos]), nil
	}
	return nil, errCanonical
}

func isNumberByte(c byte) bool {
	return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

// peek consumes c when it is next.
func (d *decoder) peek(c byte) bool {
	if d.pos < len(d.in) && d.in[d.pos] == c {
		d.pos++
		return true
	}
	return false
}

// word consumes w when it is next.
func (d *decoder) word(w string) bool {
	if len(d.in)-d.pos >= len(w) && string(d.in[d.pos:d.pos+len(w)]) == w {
		d.pos += len(w)
		return true
	}
	return false
}

// str decodes the string at pos (its opening quote). A string without an
// escape is sliced as is; one with escapes is decoded by strconv (the
// canonical form's escapes, \" \\ \b \f \n \r \t and \u00XX, are all Go
// escapes too).
func (d *decoder) str() (string, error) {
	start := d.pos
	d.pos++
	escaped := false
	for d.pos < len(d.in) {
		switch d.in[d.pos] {
		case '\\':
			escaped = true
			d.pos += 2
			continue
		case '"':
			d.pos++
			if !escaped {
				return string(d.in[start+1 : d.pos-1]), nil
			}
			s, err := strconv.Unquote(string(d.in[start:d.pos]))
			if err != nil {
				return "", errCanonical
			}
			return s, nil
		}
		d.pos++
	}
	return "", errCanonical
}

package validate

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// decodeJSON decodes one JSON value that is all of b into the tree
// encoding/json builds for `any` with UseNumber: map[string]any, []any,
// string, json.Number (the number's text), bool and nil; a repeated member
// name keeps its last value, invalid UTF-8 and lone surrogates in strings
// become U+FFFD, as encoding/json does. It scans b once and builds the tree
// as it goes, where encoding/json's Decoder copies b into its buffer, scans
// it to find the value's end (checking it) and scans it again, byte by byte
// through its state machine, as it builds the tree: a tool's schema is
// decoded once per tool on every commit (issue 27: 100,000 tools spent
// ~0.7 s of CPU in the Decoder).
// TestDecodeJSONMatchesEncodingJSON and FuzzDecodeJSON hold it to
// encoding/json's answers.
func decodeJSON(b []byte) (any, error) {
	d := decoder{b: b}
	d.space()
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	d.space()
	if d.i != len(d.b) {
		return nil, d.errorf("data after the value")
	}
	return v, nil
}

// maxDecodeDepth bounds nesting as encoding/json does (it refuses more
// than 10,000 levels); schemas deeper than Limits.MaxSchemaDepth are
// refused before they are decoded.
const maxDecodeDepth = 10000

type decoder struct {
	b []byte
	i int
}

var errDecodeEnd = errors.New("unexpected end of JSON input")

func (d *decoder) errorf(format string, args ...any) error {
	return fmt.Errorf("invalid JSON at offset %d: %s", d.i, fmt.Sprintf(format, args...))
}

func (d *decoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) value(depth int) (any, error) {
	if d.i >= len(d.b) {
		return nil, errDecodeEnd
	}
	switch c := d.b[d.i]; {
	case c == '{':
		if depth >= maxDecodeDepth {
			return nil, d.errorf("nested too deep")
		}
		return d.object(depth + 1)
	case c == '[':
		if depth >= maxDecodeDepth {
			return nil, d.errorf("nested too deep")
		}
		return d.array(depth + 1)
	case c == '"':
		return d.str()
	case c == '-' || ('0' <= c && c <= '9'):
		return d.number()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	default:
		return nil, d.errorf("unexpected %q", c)
	}
}

func (d *decoder) literal(word string) error {
	if len(d.b)-d.i < len(word) {
		return errDecodeEnd
	}
	if string(d.b[d.i:d.i+len(word)]) != word {
		return d.errorf("not %s", word)
	}
	d.i += len(word)
	return nil
}

func (d *decoder) object(depth int) (any, error) {
	m := map[string]any{}
	err := d.elements(true, func(name string) error {
		v, err := d.value(depth)
		m[name] = v
		return err
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (d *decoder) array(depth int) (any, error) {
	a := []any{}
	err := d.elements(false, func(string) error {
		v, err := d.value(depth)
		a = append(a, v)
		return err
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// elements moves past the array or object d is at, calling each once per
// element or member with d at the value (a member's name is read with
// str and handed to each when wantNames, checked and skipped otherwise);
// each moves past the value.
func (d *decoder) elements(wantNames bool, each func(name string) error) error {
	object, end := d.b[d.i] == '{', byte(']')
	if object {
		end = '}'
	}
	d.i++
	d.space()
	if d.i < len(d.b) && d.b[d.i] == end {
		d.i++
		return nil
	}
	for {
		d.space()
		var name string
		if object {
			if d.i >= len(d.b) {
				return errDecodeEnd
			}
			if d.b[d.i] != '"' {
				return d.errorf("a member name is not a string")
			}
			var err error
			if wantNames {
				name, err = d.str()
			} else {
				err = d.skipStr()
			}
			if err != nil {
				return err
			}
			d.space()
			if d.i >= len(d.b) {
				return errDecodeEnd
			}
			if d.b[d.i] != ':' {
				return d.errorf("no colon after a member name")
			}
			d.i++
			d.space()
		}
		if err := each(name); err != nil {
			return err
		}
		d.space()
		if d.i >= len(d.b) {
			return errDecodeEnd
		}
		switch d.b[d.i] {
		case ',':
			d.i++
		case end:
			d.i++
			return nil
		default:
			return d.errorf("no comma or %c after a value", end)
		}
	}
}

// number reads a number with JSON's grammar and answers its text.
func (d *decoder) number() (any, error) {
	start := d.i
	digits := func() int {
		n := 0
		for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
			d.i++
			n++
		}
		return n
	}
	if d.b[d.i] == '-' {
		d.i++
	}
	if d.i >= len(d.b) {
		return nil, errDecodeEnd
	}
	switch {
	case d.b[d.i] == '0':
		d.i++
	case '1' <= d.b[d.i] && d.b[d.i] <= '9':
		digits()
	default:
		return nil, d.errorf("no digit in a number")
	}
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		if digits() == 0 {
			if d.i >= len(d.b) {
				return nil, errDecodeEnd
			}
			return nil, d.errorf("no digit after a decimal point")
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if digits() == 0 {
			if d.i >= len(d.b) {
				return nil, errDecodeEnd
			}
			return nil, d.errorf("no digit in an exponent")
		}
	}
	return json.Number(d.b[start:d.i]), nil
}

// str reads a string; a string without escapes or bytes to replace is
// copied once.
func (d *decoder) str() (string, error) {
	d.i++ // "
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			s := string(d.b[start:d.i])
			d.i++
			return s, nil
		case c == '\\' || c >= utf8.RuneSelf:
			return d.slowStr(start)
		case c < 0x20:
			return "", d.errorf("a control character in a string")
		default:
			d.i++
		}
	}
	return "", errDecodeEnd
}

func (d *decoder) slowStr(start int) (string, error) {
	out := append(make([]byte, 0, d.i-start+16), d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			return string(out), nil
		case c < 0x20:
			return "", d.errorf("a control character in a string")
		case c == '\\':
			d.i++
			if d.i >= len(d.b) {
				return "", errDecodeEnd
			}
			e := d.b[d.i]
			d.i++
			switch e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, err := d.hex4()
				if err != nil {
					return "", err
				}
				if utf16.IsSurrogate(r) {
					// A pair names one rune; anything else is U+FFFD, and
					// the escape after a lone surrogate is read on its own.
					r2 := utf8.RuneError
					if d.i+1 < len(d.b) && d.b[d.i] == '\\' && d.b[d.i+1] == 'u' {
						save := d.i
						d.i += 2
						second, err := d.hex4()
						if err != nil {
							return "", err
						}
						if dec := utf16.DecodeRune(r, second); dec != utf8.RuneError {
							r2 = dec
						} else {
							d.i = save
						}
					}
					r = r2
				}
				out = utf8.AppendRune(out, r)
			default:
				d.i--
				return "", d.errorf("an invalid escape \\%c", e)
			}
		case c < utf8.RuneSelf:
			out = append(out, c)
			d.i++
		default:
			r, size := utf8.DecodeRune(d.b[d.i:])
			d.i += size
			out = utf8.AppendRune(out, r)
		}
	}
	return "", errDecodeEnd
}

func (d *decoder) hex4() (rune, error) {
	var r rune
	for range 4 {
		if d.i >= len(d.b) {
			return 0, errDecodeEnd
		}
		c := d.b[d.i]
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, d.errorf("an invalid \\u escape")
		}
		d.i++
	}
	return r, nil
}

// decodeMembers splits the JSON object that is all of b into its members'
// values, each the value's bytes within b (not a copy), as
// json.Unmarshal into map[string]json.RawMessage answers them: a repeated
// name keeps its last value, `null` is a nil map, any other value that is
// not an object, or b that is not one valid JSON value, is an error. It
// checks the members' values without decoding them.
func decodeMembers(b []byte) (map[string]json.RawMessage, error) {
	d := decoder{b: b}
	d.space()
	if d.i < len(d.b) && d.b[d.i] == 'n' {
		if err := d.literal("null"); err != nil {
			return nil, err
		}
		d.space()
		if d.i != len(d.b) {
			return nil, d.errorf("data after the value")
		}
		return nil, nil
	}
	if d.i >= len(d.b) {
		return nil, errDecodeEnd
	}
	if d.b[d.i] != '{' {
		// What json.Unmarshal says of a valid value of another kind, after
		// it checked all of b.
		if err := d.skip(0); err != nil {
			return nil, err
		}
		d.space()
		if d.i != len(d.b) {
			return nil, d.errorf("data after the value")
		}
		return nil, errors.New("the JSON value is not an object")
	}
	m := map[string]json.RawMessage{}
	err := d.elements(true, func(name string) error {
		start := d.i
		err := d.skip(1)
		m[name] = json.RawMessage(d.b[start:d.i:d.i])
		return err
	})
	if err != nil {
		return nil, err
	}
	d.space()
	if d.i != len(d.b) {
		return nil, d.errorf("data after the value")
	}
	return m, nil
}

// skip checks one value and moves past it, building nothing.
func (d *decoder) skip(depth int) error {
	if d.i >= len(d.b) {
		return errDecodeEnd
	}
	switch c := d.b[d.i]; {
	case c == '{' || c == '[':
		if depth >= maxDecodeDepth {
			return d.errorf("nested too deep")
		}
		return d.elements(false, func(string) error { return d.skip(depth + 1) })
	case c == '"':
		return d.skipStr()
	case c == '-' || ('0' <= c && c <= '9'):
		_, err := d.number()
		return err
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.literal("null")
	default:
		return d.errorf("unexpected %q", c)
	}
}

// skipStr checks a string (its escapes and that it has no control
// characters) and moves past it.
func (d *decoder) skipStr() error {
	d.i++ // "
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			return nil
		case c < 0x20:
			return d.errorf("a control character in a string")
		case c == '\\':
			d.i++
			if d.i >= len(d.b) {
				return errDecodeEnd
			}
			switch d.b[d.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.i++
			case 'u':
				d.i++
				if _, err := d.hex4(); err != nil {
					return err
				}
			default:
				return d.errorf("an invalid escape \\%c", d.b[d.i])
			}
		default:
			d.i++
		}
	}
	return errDecodeEnd
}

package validate

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// referenceDecode is what checkSchema decoded with before decodeJSON:
// encoding/json with UseNumber, one value that is all of b.
func referenceDecode(b []byte) (any, bool) {
	if !json.Valid(b) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}

func sameAsEncodingJSON(t *testing.T, b []byte) {
	t.Helper()
	want, ok := referenceDecode(b)
	got, err := decodeJSON(b)
	switch {
	case ok != (err == nil):
		t.Fatalf("%q: encoding/json accepts it: %v; decodeJSON: %v", b, ok, err)
	case ok && !reflect.DeepEqual(got, want):
		t.Fatalf("%q: decodeJSON = %#v; encoding/json = %#v", b, got, want)
	}
}

// decodeJSON builds the tree encoding/json builds (UseNumber) and refuses
// what it refuses: every kind of value, escapes, surrogate pairs and lone
// surrogates, invalid UTF-8, repeated members, numbers at the edges of the
// grammar, whitespace, truncated input, data after the value and nesting
// past 10,000 levels.
func TestDecodeJSONMatchesEncodingJSON(t *testing.T) {
	cases := []string{
		`{}`, `[]`, `{"type":"object"}`, ` { "a" : [ 1 , 2.5e-3 , -0 , 1E+9 , true , false , null ] } `,
		`{"properties":{"id":{"description":"what to act on","type":"string"}},"required":["id"],"type":"object"}`,
		`{"a":1,"a":2}`, `{"a":{"b":1},"a":[]}`, `"x"`, `0`, `-1.5`, `true`, `null`,
		`"\"\\\/\b\f\n\r\t"`, `"\u00e9\u4e2d\uD83D\uDE00"`, `"\uD83D"`, `"\uDE00\uD83D"`, `"\uD83D\u0041"`,
		`"\uD83Dx"`, `"\uD83D\uD83D\uDE00"`, "\"\xff\xfe\"", "\"a\xc3\x28b\"", "\"\xe2\x82\"", `"é中😀"`,
		`{"\u0061":1,"a":2}`, `[[[[]]]]`, `{"a":{"b":{"c":[{"d":null}]}}}`,
		// refused
		``, ` `, `{`, `{"a"`, `{"a":`, `{"a":1`, `{"a":1,}`, `[1,]`, `[1 2]`, `{"a" 1}`, `{a:1}`, `{1:1}`,
		`01`, `-`, `1.`, `.5`, `1e`, `1e+`, `+1`, `0x1`, `NaN`, `tru`, `nul`, `"abc`, `"\x"`, `"\u12"`, `"\u12g4"`,
		"\"a\x01b\"", "\"\t\"", `{} x`, `[] []`, `"\`, `{"a":1}}`, `]`, `[1]]`,
		strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
		strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001),
	}
	for _, c := range cases {
		sameAsEncodingJSON(t, []byte(c))
	}
}

// FuzzDecodeJSON holds decodeJSON to encoding/json on any input.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{`{"type":"object","properties":{"a":{"type":"string","maxLength":1e3}}}`,
		`["\uD83D\uDE00",-0.5e+10,{"":null}]`, "\"\xff\\u0041\"", `{"a":[1,{"b":true}],"a":false}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { sameAsEncodingJSON(t, b) })
}

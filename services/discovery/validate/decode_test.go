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

func sameMembersAsEncodingJSON(t *testing.T, b []byte) {
	t.Helper()
	var want map[string]json.RawMessage
	werr := json.Unmarshal(b, &want)
	got, err := decodeMembers(b)
	if (werr == nil) != (err == nil) {
		t.Fatalf("%q: json.Unmarshal: %v; decodeMembers: %v", b, werr, err)
	}
	if werr != nil {
		return
	}
	if (want == nil) != (got == nil) || len(got) != len(want) {
		t.Fatalf("%q: decodeMembers = %q; json.Unmarshal = %q", b, got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || !bytes.Equal(g, v) {
			t.Fatalf("%q: member %q = %q; json.Unmarshal: %q", b, k, g, v)
		}
	}
}

// decodeMembers answers what json.Unmarshal into map[string]json.RawMessage
// answers (the tool's members, split before each is checked).
func TestDecodeMembersMatchesEncodingJSON(t *testing.T) {
	cases := []string{
		`{}`, ` { } `, `null`, ` null `, `{"name":"a","inputSchema":{"type":"object","properties":{"x":{"type":"string"}}}}`,
		`{"a":1,"a":[2, 3 ]}`, `{"\u006e\u0061me":"x","name":"y"}`, "{\"\xff\":1}", `{"a":"\uD83D\uDE00","b":[{},[],null,true,false,-1.5e3]}`,
		`{"a" : { "b" : [ 1 , 2 ] } }`,
		// refused
		``, `[]`, `"x"`, `1`, `true`, `{"a":1}x`, `{"a":}`, `{"a":[1,]}`, `{"a":"\q"}`, "{\"a\":\"\x01\"}", `{"a":01}`,
		`{"a":{"b":1}`, `{"a":1,}`, `nul`, `null x`, `{"a":[1 2]}`, `{"a":"\u12"}`, `[1,`,
		`{"a":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`,
		`{"a":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`,
	}
	for _, c := range cases {
		sameMembersAsEncodingJSON(t, []byte(c))
	}
}

// FuzzDecodeMembers holds decodeMembers to json.Unmarshal on any input.
func FuzzDecodeMembers(f *testing.F) {
	for _, s := range []string{`{"name":"t","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`,
		`{"a":"\uD83D","a":["\n",{"":null}]}`, `null`, `[1]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { sameMembersAsEncodingJSON(t, b) })
}

package args

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolcrib/toolcrib/platform/canonical"
)

// FuzzDecodeCanonicalMatchesJSONSchema: for every input canonical accepts,
// decodeCanonical gives exactly the value jsonschema.UnmarshalJSON gives
// (the decoder it replaced), numbers as json.Number with the same text.
func FuzzDecodeCanonicalMatchesJSONSchema(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `{"shipment_id":"S1"}`, `{"a":[1,-2.5,3e21,0,true,false,null],"b":{"c":{"d":[]}}}`,
		`{"esc":"q\"b\\s\/ctl\u0001\n\t\r\b\f","uni":"é漢\ud83d\ude00"}`, `"top"`, `12`, `null`,
		`{"k":1,"k2":{"":""}}`, `[[[[["deep"]]]]]`, `{"n":-0.000001,"m":1e-7,"big":123456789012345678901234567890}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		canon, err := canonical.Transform(raw)
		if err != nil {
			return
		}
		want, werr := jsonschema.UnmarshalJSON(bytes.NewReader(canon))
		got, gerr := decodeCanonical(canon)
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("%q: jsonschema %v, decodeCanonical %v", canon, werr, gerr)
		}
		if werr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n got %#v\nwant %#v", canon, got, want)
		}
	})
}

func TestDecodeCanonicalRefusesNonCanonical(t *testing.T) {
	for _, s := range []string{``, `{`, `{"a"}`, `{"a":1,}`, `[1 2]`, `{"a":1}x`, `"open`, `tru`, `{1:2}`} {
		if _, err := decodeCanonical([]byte(s)); err == nil {
			t.Errorf("%q decoded", s)
		}
	}
}

package canonical

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzTransform checks, for any input: no panic; accepted input is valid
// JSON that means the same as the input; canonicalization is idempotent.
func FuzzTransform(f *testing.F) {
	for _, seed := range []string{
		`{"b":1,"a":[true,false,null,"x\u00e9\ud83d\ude00"]}`,
		`[1e30, 4.50, -0, 0.000001, 1e-7, 123456789012345678901234567890]`,
		`{"\u20ac":"","\r":1,"\ufb33":2,"\ud83d\ude00":3}`,
		`"\u0000\u001f\"\\\/"`,
		`{"a":{"a":{"a":[]}}}`,
		`{"a":1,"a":2}`,
		"\"\xff\"",
		`1e400`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Transform(in)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("output is not JSON: %q", out)
		}
		again, err := Transform(out)
		if err != nil {
			t.Fatalf("canonical output refused: %v", err)
		}
		if string(again) != string(out) {
			t.Fatalf("not idempotent:\n%s\n%s", out, again)
		}
		var a, b any
		if err := json.Unmarshal(in, &a); err != nil {
			t.Fatalf("accepted input encoding/json refuses: %v", err)
		}
		if err := json.Unmarshal(out, &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("meaning changed:\n%v\n%v", a, b)
		}
	})
}

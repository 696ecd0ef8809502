package keyring_test

import (
	"encoding/json"
	"testing"

	"github.com/toolcrib/toolcrib/platform/keyring"
)

// FuzzAppendJSONString: any string is appended as json.Marshal writes it.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain-id_1.2", "<a>&b", `"q" \ /`, "\x00\x1f\x7f", "é\u2028\u2029", "\xff\xfe", "tab\there"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := keyring.AppendJSONString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Fatalf("%q: got %s, want x%s", s, got, want)
		}
	})
}

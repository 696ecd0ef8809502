package revision_test

import (
	"testing"
)

// FuzzCursorDecode feeds arbitrary text to the cursor decoder, which reads
// outside input from every `tools/list` request. It must never panic, and
// whatever it accepts must be exactly what Encode produces for the decoded
// pair (no second spelling of a cursor).
func FuzzCursorDecode(f *testing.F) {
	codec := newCodec(f, testKey)
	for _, seed := range []string{
		"",
		"AA",
		"!!",
		codec.Encode("", 0),
		codec.Encode("r-1", 1),
		codec.Encode("m3x0k2a1.7", 1234567),
		codec.Encode("r-1", 1) + "=",
		newCodec(f, []byte("another key, sixteen+ bytes")).Encode("r-1", 1),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, cursor string) {
		rev, pos, err := codec.Decode(cursor)
		if err != nil {
			return
		}
		if again := codec.Encode(rev, pos); again != cursor {
			t.Fatalf("Decode accepted %q as (%q, %d), which encodes as %q", cursor, rev, pos, again)
		}
	})
}

package revision_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolcrib/toolcrib/revision"
)

func newCodec(t testing.TB, key []byte) *revision.CursorCodec {
	t.Helper()
	c, err := revision.NewCursorCodec(key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCursorRoundTrip(t *testing.T) {
	codec := newCodec(t, testKey)
	cases := []struct {
		revision string
		position int
	}{
		{"", 0},
		{"r-1", 1},
		{"m3x0k2a1.7", 100},
		{"unicode ✓ revision", 99_999},
		{strings.Repeat("r", revision.MaxRevisionLength), 1<<31 - 1},
	}
	for _, tc := range cases {
		cursor := codec.Encode(tc.revision, tc.position)
		if len(cursor) > revision.MaxCursorLength {
			t.Errorf("cursor for %q is %d bytes, over the %d limit", tc.revision, len(cursor), revision.MaxCursorLength)
		}
		rev, pos, err := codec.Decode(cursor)
		if err != nil || rev != tc.revision || pos != tc.position {
			t.Errorf("Decode(Encode(%q, %d)) = %q, %d, %v", tc.revision, tc.position, rev, pos, err)
		}
	}
}

func TestCursorDecodeRefuses(t *testing.T) {
	codec := newCodec(t, testKey)
	valid := codec.Encode("r-7", 20)
	cases := map[string]string{
		"empty":                   "",
		"padding added":           valid + "=",
		"standard base64 symbols": strings.ReplaceAll(strings.ReplaceAll(valid, "-", "+"), "_", "/") + "+/",
		"signed with another key": newCodec(t, []byte("a completely different key")).Encode("r-7", 20),
		"last byte changed":       valid[:len(valid)-1] + string(valid[len(valid)-1]^1),
		"too long":                strings.Repeat("A", revision.MaxCursorLength+1),
		"only a tag":              strings.Repeat("A", 22),
		// Found by FuzzCursorDecode: base64 decoding skips CR and LF, which
		// gave a cursor a second spelling.
		"a carriage return inside": valid[:8] + "\r" + valid[8:],
		"a line feed at the end":   valid + "\n",
	}
	for name, cursor := range cases {
		t.Run(name, func(t *testing.T) {
			if _, _, err := codec.Decode(cursor); !errors.Is(err, revision.ErrInvalidCursor) {
				t.Fatalf("Decode = %v, want ErrInvalidCursor", err)
			}
		})
	}
}

func TestNewCursorCodecCopiesTheKey(t *testing.T) {
	key := append([]byte(nil), testKey...)
	codec := newCodec(t, key)
	cursor := codec.Encode("r", 1)
	key[0] ^= 0xff
	if _, _, err := codec.Decode(cursor); err != nil {
		t.Fatalf("changing the caller's key slice broke the codec: %v", err)
	}
}

func TestEncodePanicsOnProgrammingErrors(t *testing.T) {
	codec := newCodec(t, testKey)
	cases := map[string]func(){
		"negative position":  func() { codec.Encode("r", -1) },
		"revision too long":  func() { codec.Encode(strings.Repeat("r", revision.MaxRevisionLength+1), 1) },
		"position too large": func() { codec.Encode("r", 1<<31) },
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			f()
		})
	}
}

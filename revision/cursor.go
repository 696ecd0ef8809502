package revision

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrInvalidCursor is returned by [CursorCodec.Decode] for a cursor that is
// not one this codec minted: garbled, truncated, forged, or signed with
// another key.
var ErrInvalidCursor = errors.New("revision: invalid cursor")

// Limits of what a cursor may carry. Longer input is refused before any
// decoding work.
const (
	// MaxRevisionLength is the longest revision string a cursor can carry.
	MaxRevisionLength = 256
	// MaxCursorLength is the longest cursor [CursorCodec.Decode] accepts, in
	// bytes of its text form.
	MaxCursorLength = 512
	// MinKeyLength is the shortest HMAC key [NewCursorCodec] accepts.
	MinKeyLength = 16
)

const (
	cursorVersion = 1
	macLength     = 16 // truncated HMAC-SHA256: 128-bit tag
	macDomain     = "dev.toolcrib/cursor/v1\x00"
)

var cursorEncoding = base64.RawURLEncoding.Strict()

// CursorCodec mints and checks revision-bound `tools/list` cursors. A cursor
// is the URL-safe base64 of a version byte, the revision, the position of the
// next tool and a truncated HMAC-SHA256 over all of it. A CursorCodec is safe
// for concurrent use.
type CursorCodec struct {
	key []byte
}

// NewCursorCodec returns a codec signing with key, which must be at least
// [MinKeyLength] bytes. Keep the key secret and stable across restarts if
// cursors should survive them (they never survive a revision change).
func NewCursorCodec(key []byte) (*CursorCodec, error) {
	if len(key) < MinKeyLength {
		return nil, fmt.Errorf("revision: cursor key has %d bytes, need at least %d", len(key), MinKeyLength)
	}
	return &CursorCodec{key: append([]byte(nil), key...)}, nil
}

// Encode returns the cursor for position (the index of the next tool to
// list) under revision. It panics if position is negative or above 2³¹-1,
// or if revision is longer than [MaxRevisionLength]: both are programming
// errors.
func (c *CursorCodec) Encode(revision string, position int) string {
	if position < 0 || position > maxPosition {
		panic(fmt.Sprintf("revision: cursor position %d out of range", position))
	}
	if len(revision) > MaxRevisionLength {
		panic(fmt.Sprintf("revision: revision of %d bytes is longer than %d", len(revision), MaxRevisionLength))
	}
	buf := make([]byte, 0, 1+2*binary.MaxVarintLen64+len(revision)+macLength)
	buf = append(buf, cursorVersion)
	buf = binary.AppendUvarint(buf, uint64(len(revision)))
	buf = append(buf, revision...)
	buf = binary.AppendUvarint(buf, uint64(position))
	buf = append(buf, c.mac(buf)...)
	return cursorEncoding.EncodeToString(buf)
}

// Decode checks cursor's signature and returns the revision and position it
// was minted for. Every failure wraps [ErrInvalidCursor]; Decode never
// panics, whatever the input.
func (c *CursorCodec) Decode(cursor string) (revision string, position int, err error) {
	if len(cursor) > MaxCursorLength {
		return "", 0, fmt.Errorf("%w: longer than %d bytes", ErrInvalidCursor, MaxCursorLength)
	}
	raw, err := cursorEncoding.DecodeString(cursor)
	// The decoder skips CR and LF and ignores a last character's unused
	// bits: accept only the one spelling Encode gives, so a cursor has no
	// second spelling.
	if err != nil || cursorEncoding.EncodeToString(raw) != cursor {
		return "", 0, fmt.Errorf("%w: not base64url", ErrInvalidCursor)
	}
	if len(raw) < 1+macLength {
		return "", 0, fmt.Errorf("%w: too short", ErrInvalidCursor)
	}
	body, tag := raw[:len(raw)-macLength], raw[len(raw)-macLength:]
	if !hmac.Equal(tag, c.mac(body)) {
		return "", 0, fmt.Errorf("%w: bad signature", ErrInvalidCursor)
	}
	// Signed by us, so well formed unless the key is shared with a different
	// format; parse defensively all the same.
	if body[0] != cursorVersion {
		return "", 0, fmt.Errorf("%w: unknown version %d", ErrInvalidCursor, body[0])
	}
	rest := body[1:]
	n, k := binary.Uvarint(rest)
	if k <= 0 || n > MaxRevisionLength || uint64(len(rest)-k) < n {
		return "", 0, fmt.Errorf("%w: bad revision length", ErrInvalidCursor)
	}
	revision = string(rest[k : k+int(n)])
	rest = rest[k+int(n):]
	p, k := binary.Uvarint(rest)
	if k <= 0 || k != len(rest) || p > uint64(maxPosition) {
		return "", 0, fmt.Errorf("%w: bad position", ErrInvalidCursor)
	}
	return revision, int(p), nil
}

// maxPosition bounds positions to what fits an int on every platform.
const maxPosition = 1<<31 - 1

func (c *CursorCodec) mac(body []byte) []byte {
	h := hmac.New(sha256.New, c.key)
	h.Write([]byte(macDomain))
	h.Write(body)
	return h.Sum(nil)[:macLength]
}

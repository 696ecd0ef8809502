package signedreceipt

import (
	"bytes"
	"encoding/base64"
	"slices"
	"strings"
	"unicode/utf8"
)

// The one protected header a signed receipt has: exactly the bytes [Sign]
// writes, `{"alg":"EdDSA","kid":"<kid>","typ":"receipt+jwt"}`. [Parse]
// accepts no other spelling of it (no other order, no whitespace, no
// escape, no `crit`, `jwk`, `b64` or any further member), so nothing a
// JOSE library would read differently (a duplicate member, an embedded
// key, an unencoded payload) can reach the signature check.
const (
	headerPrefix = `{"alg":"EdDSA","kid":"`
	headerSuffix = `","typ":"` + TokenType + `"}`
)

// maxKeyIDBytes bounds a key id in a header.
const maxKeyIDBytes = 256

// b64 is unpadded base64url that refuses non-canonical input (stray bits
// in the last character, padding; line breaks, which it would skip, are
// refused by [splitCompact]), so each token has one encoding.
var b64 = base64.RawURLEncoding.Strict()

// validKeyID reports whether id may appear in a header as it is: non-empty,
// bounded, printable ASCII without a quote or a backslash (JSON needs no
// escape for it, so the header has one spelling).
func validKeyID(id string) bool {
	if id == "" || len(id) > maxKeyIDBytes {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// appendHeader appends the protected header of a receipt signed by the key
// with id kid (a [validKeyID]).
func appendHeader(b []byte, kid string) []byte {
	b = append(b, headerPrefix...)
	b = append(b, kid...)
	return append(b, headerSuffix...)
}

// compactJWS is a compact JWS split and decoded: the key id its header
// names, its payload, its signature and the input the signature covers.
type compactJWS struct {
	kid       string
	payload   []byte
	signature []byte
	input     []byte
}

// splitCompact splits and decodes a compact JWS whose header is a
// receipt's; ok is false for anything else: not three parts, a segment
// that is not canonical unpadded base64url, another header, a signature
// that is not 64 bytes.
func splitCompact(compact string) (jws compactJWS, ok bool) {
	// The base64 decoder skips CR and LF even when strict: refused here, so
	// a segment has one spelling and the bytes verified are the ones meant.
	if strings.ContainsAny(compact, "\r\n") {
		return jws, false
	}
	h, rest, found := strings.Cut(compact, ".")
	if !found {
		return jws, false
	}
	p, s, found := strings.Cut(rest, ".")
	if !found || strings.IndexByte(s, '.') >= 0 || h == "" || p == "" {
		return jws, false
	}
	header := make([]byte, 0, b64.DecodedLen(len(h)))
	header, err := b64.AppendDecode(header, []byte(h))
	if err != nil || !bytes.HasPrefix(header, []byte(headerPrefix)) || !bytes.HasSuffix(header, []byte(headerSuffix)) ||
		len(header) <= len(headerPrefix)+len(headerSuffix) {
		return jws, false
	}
	jws.kid = string(header[len(headerPrefix) : len(header)-len(headerSuffix)])
	if !validKeyID(jws.kid) {
		return jws, false
	}
	if b64.DecodedLen(len(s)) != 64 {
		return jws, false
	}
	if jws.signature, err = b64.AppendDecode(make([]byte, 0, 64), []byte(s)); err != nil || len(jws.signature) != 64 {
		return jws, false
	}
	if jws.payload, err = b64.AppendDecode(make([]byte, 0, b64.DecodedLen(len(p))), []byte(p)); err != nil {
		return jws, false
	}
	jws.input = []byte(compact[:len(h)+1+len(p)])
	return jws, true
}

// claimNames are the JSON names of [wireClaims], the only spellings of
// them a receipt may use.
var claimNames = [...]string{"jti", "sub", "tenant", "decision", "reason", "tool", "server", "class", "gen", "dd",
	"epoch", "arg", "mode", "effect", "run", "replica", "confirmer", "shown", "iat_ms", "iat", "exp"}

// strictMembers reports whether the JSON object obj (valid JSON: it has
// been decoded already) names each member once, and names every claim of
// [wireClaims] exactly as [Sign] writes it. encoding/json keeps the last of
// two members with one name and matches names case-insensitively (with
// Unicode folding: "ſub" is "sub"); a receipt relying on either would mean
// one thing to this parser and another to a stricter one, so it is
// refused. Members of other names (claims a newer admission adds) are
// allowed once each.
func strictMembers(obj []byte) bool {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return false
	}
	var (
		seen  [len(claimNames)]bool
		other []string // the names of other members
	)
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return true
	}
	for i < len(obj) {
		end, ok := skipString(obj, i)
		if !ok {
			return false
		}
		raw := obj[i+1 : end-1]
		if bytes.IndexByte(raw, '\\') >= 0 {
			// An escaped name could spell a claim another way.
			return false
		}
		switch c, ok := memberName(raw); {
		case !ok:
			return false
		case c >= 0 && seen[c]:
			return false
		case c >= 0:
			seen[c] = true
		case slices.Contains(other, string(raw)):
			return false
		default:
			other = append(other, string(raw))
		}
		i = skipSpace(obj, end)
		if i >= len(obj) || obj[i] != ':' {
			return false
		}
		if i, ok = skipValue(obj, skipSpace(obj, i+1)); !ok {
			return false
		}
		i = skipSpace(obj, i)
		if i >= len(obj) {
			return false
		}
		switch obj[i] {
		case ',':
			i = skipSpace(obj, i+1)
		case '}':
			return skipSpace(obj, i+1) == len(obj)
		default:
			return false
		}
	}
	return false
}

// memberName returns the index in [claimNames] of the member name raw (-1
// for a name of no claim); ok is false for a name encoding/json would match
// to a claim it does not spell exactly, and for one that is not UTF-8.
func memberName(raw []byte) (claim int, ok bool) {
	if c := claimIndex(raw); c >= 0 {
		return c, true
	}
	if !utf8.Valid(raw) {
		return 0, false
	}
	for _, c := range claimNames {
		if bytes.EqualFold(raw, []byte(c)) {
			return 0, false
		}
	}
	return -1, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the JSON string starting at i.
func skipString(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, false
	}
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1, true
		}
	}
	return 0, false
}

// skipValue returns the index just past the JSON value starting at i
// (nested objects and arrays included; their members are not checked).
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				end, ok := skipString(b, i)
				if !ok {
					return 0, false
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
			i++
		}
		return 0, false
	}
	// A number, true, false or null: up to the next delimiter.
	start := i
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	return i, i > start
}

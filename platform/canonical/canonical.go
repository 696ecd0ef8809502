package canonical

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrInvalid is wrapped by every error for input that is not I-JSON.
var ErrInvalid = errors.New("canonical: invalid JSON")

// MaxDepth is the deepest nesting of arrays and objects accepted. Deeper
// input is refused rather than risking unbounded recursion on hostile data.
const MaxDepth = 1000

// DigestPrefix starts every digest this package produces.
const DigestPrefix = "sha256:"

// Transform returns the RFC 8785 canonical form of one JSON text.
func Transform(raw []byte) ([]byte, error) {
	return AppendTransform(make([]byte, 0, len(raw)), raw)
}

// AppendTransform appends the canonical form of raw to dst.
func AppendTransform(dst, raw []byte) ([]byte, error) {
	p := parser{in: raw}
	p.skipSpace()
	out, err := p.value(dst, 0)
	if err != nil {
		return dst, err
	}
	p.skipSpace()
	if p.pos != len(p.in) {
		return dst, p.errorf("unexpected data after the JSON value")
	}
	return out, nil
}

// Digest returns `sha256:<hex>` of the canonical form of raw.
func Digest(raw []byte) (string, error) {
	c, err := Transform(raw)
	if err != nil {
		return "", err
	}
	return DigestBytes(c), nil
}

// DigestBytes returns `sha256:<hex>` of b as given. Use it for bytes that are
// already canonical, or for concatenations of digests (page roots).
func DigestBytes(b []byte) string {
	sum := sha256.Sum256(b)
	var out [len(DigestPrefix) + 2*sha256.Size]byte // one allocation: the string
	copy(out[:], DigestPrefix)
	hex.Encode(out[len(DigestPrefix):], sum[:])
	return string(out[:])
}

// Marshal encodes v with encoding/json and returns its canonical form.
func Marshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("canonical: marshal: %w", err)
	}
	return Transform(b)
}

// DigestValue returns the digest of the canonical JSON encoding of v.
func DigestValue(v any) (string, error) {
	c, err := Marshal(v)
	if err != nil {
		return "", err
	}
	return DigestBytes(c), nil
}

// ValidDigest reports whether s has the form `sha256:` followed by 64
// lowercase hex digits.
func ValidDigest(s string) bool {
	if len(s) != len(DigestPrefix)+64 || s[:len(DigestPrefix)] != DigestPrefix {
		return false
	}
	for _, c := range []byte(s[len(DigestPrefix):]) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

type parser struct {
	in  []byte
	pos int
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: offset %d: %s", ErrInvalid, p.pos, fmt.Sprintf(format, args...))
}

func (p *parser) skipSpace() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value(dst []byte, depth int) ([]byte, error) {
	if p.pos >= len(p.in) {
		return dst, p.errorf("unexpected end of input")
	}
	switch c := p.in[p.pos]; {
	case c == '{':
		return p.object(dst, depth+1)
	case c == '[':
		return p.array(dst, depth+1)
	case c == '"':
		s, err := p.str()
		if err != nil {
			return dst, err
		}
		return appendString(dst, s), nil
	case c == '-' || '0' <= c && c <= '9':
		return p.number(dst)
	default:
		for _, lit := range [...]string{"true", "false", "null"} {
			if len(p.in)-p.pos >= len(lit) && string(p.in[p.pos:p.pos+len(lit)]) == lit {
				p.pos += len(lit)
				return append(dst, lit...), nil
			}
		}
		return dst, p.errorf("unexpected character %q", c)
	}
}

type member struct {
	key   string
	value []byte
}

func (p *parser) object(dst []byte, depth int) ([]byte, error) {
	if depth > MaxDepth {
		return dst, p.errorf("nesting deeper than %d", MaxDepth)
	}
	p.pos++ // '{'
	var members []member
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		return append(dst, "{}"...), nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return dst, p.errorf("expected a member name")
		}
		key, err := p.str()
		if err != nil {
			return dst, err
		}
		p.skipSpace()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return dst, p.errorf("expected ':' after member name")
		}
		p.pos++
		p.skipSpace()
		v, err := p.value(nil, depth)
		if err != nil {
			return dst, err
		}
		members = append(members, member{key: key, value: v})
		p.skipSpace()
		if p.pos >= len(p.in) {
			return dst, p.errorf("unexpected end of input in object")
		}
		if p.in[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.in[p.pos] == '}' {
			p.pos++
			break
		}
		return dst, p.errorf("expected ',' or '}' in object")
	}
	slices.SortFunc(members, func(a, b member) int { return compareUTF16(a.key, b.key) })
	for i := 1; i < len(members); i++ {
		if members[i-1].key == members[i].key {
			return dst, p.errorf("duplicate member name %q", members[i].key)
		}
	}
	dst = append(dst, '{')
	for i, m := range members {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, m.key)
		dst = append(dst, ':')
		dst = append(dst, m.value...)
	}
	return append(dst, '}'), nil
}

func (p *parser) array(dst []byte, depth int) ([]byte, error) {
	if depth > MaxDepth {
		return dst, p.errorf("nesting deeper than %d", MaxDepth)
	}
	p.pos++ // '['
	dst = append(dst, '[')
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		return append(dst, ']'), nil
	}
	for first := true; ; first = false {
		if !first {
			dst = append(dst, ',')
		}
		p.skipSpace()
		var err error
		if dst, err = p.value(dst, depth); err != nil {
			return dst, err
		}
		p.skipSpace()
		if p.pos >= len(p.in) {
			return dst, p.errorf("unexpected end of input in array")
		}
		if p.in[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.in[p.pos] == ']' {
			p.pos++
			return append(dst, ']'), nil
		}
		return dst, p.errorf("expected ',' or ']' in array")
	}
}

// str parses a JSON string at p.pos and returns its decoded value.
func (p *parser) str() (string, error) {
	p.pos++ // opening quote
	start := p.pos
	// Fast path: no escapes.
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		if c == '"' {
			s := p.in[start:p.pos]
			if !utf8.Valid(s) {
				return "", p.errorf("invalid UTF-8 in string")
			}
			p.pos++
			return string(s), nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", p.errorf("unescaped control character in string")
		}
		p.pos++
	}
	buf := append([]byte(nil), p.in[start:p.pos]...)
	for {
		if p.pos >= len(p.in) {
			return "", p.errorf("unterminated string")
		}
		c := p.in[p.pos]
		switch {
		case c == '"':
			if !utf8.Valid(buf) {
				return "", p.errorf("invalid UTF-8 in string")
			}
			p.pos++
			return string(buf), nil
		case c < 0x20:
			return "", p.errorf("unescaped control character in string")
		case c != '\\':
			buf = append(buf, c)
			p.pos++
			continue
		}
		// Escape sequence.
		if p.pos+1 >= len(p.in) {
			return "", p.errorf("unterminated escape")
		}
		e := p.in[p.pos+1]
		p.pos += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, err := p.hex4()
			if err != nil {
				return "", err
			}
			if utf16.IsSurrogate(r) {
				if r >= 0xDC00 {
					return "", p.errorf("lone low surrogate")
				}
				if p.pos+1 >= len(p.in) || p.in[p.pos] != '\\' || p.in[p.pos+1] != 'u' {
					return "", p.errorf("lone high surrogate")
				}
				p.pos += 2
				r2, err := p.hex4()
				if err != nil {
					return "", err
				}
				if r2 < 0xDC00 || r2 > 0xDFFF {
					return "", p.errorf("high surrogate not followed by a low surrogate")
				}
				r = utf16.DecodeRune(r, r2)
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", p.errorf("invalid escape '\\%c'", e)
		}
	}
}

func (p *parser) hex4() (rune, error) {
	if p.pos+4 > len(p.in) {
		return 0, p.errorf("short \\u escape")
	}
	var r rune
	for _, c := range p.in[p.pos : p.pos+4] {
		r <<= 4
		switch {
		case '0' <= c && c <= '9':
			r |= rune(c - '0')
		case 'a' <= c && c <= 'f':
			r |= rune(c - 'a' + 10)
		case 'A' <= c && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, p.errorf("invalid hex digit in \\u escape")
		}
	}
	p.pos += 4
	return r, nil
}

func (p *parser) number(dst []byte) ([]byte, error) {
	start := p.pos
	if p.in[p.pos] == '-' {
		p.pos++
	}
	digits := func() int {
		n := 0
		for p.pos < len(p.in) && '0' <= p.in[p.pos] && p.in[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if p.pos < len(p.in) && p.in[p.pos] == '0' {
		p.pos++
	} else if digits() == 0 {
		return dst, p.errorf("invalid number")
	}
	if p.pos < len(p.in) && p.in[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return dst, p.errorf("invalid number: no digits after '.'")
		}
	}
	if p.pos < len(p.in) && (p.in[p.pos] == 'e' || p.in[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.in) && (p.in[p.pos] == '+' || p.in[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return dst, p.errorf("invalid number: no exponent digits")
		}
	}
	f, err := strconv.ParseFloat(string(p.in[start:p.pos]), 64)
	if err != nil || math.IsInf(f, 0) {
		return dst, p.errorf("number %s is not representable as an IEEE 754 double", p.in[start:p.pos])
	}
	return AppendNumber(dst, f), nil
}

// AppendNumber appends f in the ECMAScript Number.prototype.toString form
// RFC 8785 requires. f must be finite.
func AppendNumber(dst []byte, f float64) []byte {
	if f == 0 { // also -0
		return append(dst, '0')
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	// Shortest round-tripping digits, as ECMAScript requires.
	e := strconv.AppendFloat(nil, f, 'e', -1, 64) // d[.ddd]e±XX
	var digits []byte
	i := 0
	for ; e[i] != 'e'; i++ {
		if e[i] != '.' {
			digits = append(digits, e[i])
		}
	}
	exp, _ := strconv.Atoi(string(e[i+1:]))
	k := len(digits)
	n := exp + 1 // value = 0.digits × 10^n
	switch {
	case k <= n && n <= 21:
		dst = append(dst, digits...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, digits[:n]...)
		dst = append(dst, '.')
		dst = append(dst, digits[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	default:
		dst = append(dst, digits[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(n-1), 10)
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as an RFC 8785 string, as [Transform] writes the
// JSON string that encodes s. s must be valid UTF-8. It lets a caller write
// the canonical form of a value it knows directly, without encoding it with
// encoding/json and parsing that again.
func AppendString(dst []byte, s string) []byte { return appendString(dst, s) }

// appendString appends s as a JCS string: only '"', '\\' and control
// characters are escaped; everything else is written as UTF-8.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// compareUTF16 orders two valid UTF-8 strings by their UTF-16 code units, as
// RFC 8785 §3.2.3 requires for member names.
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			ua, ub := firstUnit(ra), firstUnit(rb)
			if ua != ub {
				return int(ua) - int(ub)
			}
			// Same high surrogate: both are supplementary; the low
			// surrogates order like the code points.
			return int(ra) - int(rb)
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

// firstUnit returns the first UTF-16 code unit of r.
func firstUnit(r rune) rune {
	if r >= 0x10000 {
		hi, _ := utf16.EncodeRune(r)
		return hi
	}
	return r
}

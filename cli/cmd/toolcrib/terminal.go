package main

import (
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Server data (names, commands, descriptions from MCP servers) is
// untrusted: printed raw, an ESC sequence could retitle or clear the
// operator's terminal, hide lines or fake output, and a bidirectional
// override could reorder what is shown. The CLI never prints them raw.

// unsafeRune reports whether r must not reach a terminal raw. keepLayout
// spares newline and tab (the CLI's own table layout).
func unsafeRune(r rune, keepLayout bool) bool {
	if keepLayout && (r == '\n' || r == '\t') {
		return false
	}
	return unicode.IsControl(r) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) ||
		r == 0x200e || r == 0x200f || r == utf8.RuneError
}

// escapeRune writes r escaped: \n, \t, \xNN for other ASCII controls and
// \uNNNN otherwise (the same spelling as in JSON and Go).
func escapeRune(b *strings.Builder, r rune) {
	switch {
	case r == '\n':
		b.WriteString(`\n`)
	case r == '\t':
		b.WriteString(`\t`)
	case r == '\r':
		b.WriteString(`\r`)
	case r < 0x80:
		fmt.Fprintf(b, `\x%02x`, r)
	default:
		fmt.Fprintf(b, `\u%04x`, r)
	}
}

// safe returns s with every control character (newline and tab included)
// and bidirectional control escaped: for one value in one table cell.
func safe(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return unsafeRune(r, false) }) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unsafeRune(r, false) {
			escapeRune(&b, r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// terminalWriter escapes, as a last line of defence, every control
// character but newline and tab in everything the CLI prints, whatever
// code path produced it. A UTF-8 sequence split across writes is held
// until it is complete.
type terminalWriter struct {
	w       io.Writer
	pending []byte
}

func newTerminalWriter(w io.Writer) *terminalWriter { return &terminalWriter{w: w} }

func (t *terminalWriter) Write(p []byte) (int, error) {
	buf := append(t.pending, p...)
	t.pending = nil
	// Hold an incomplete trailing rune for the next write.
	if i := lastRuneStart(buf); i >= 0 && !utf8.FullRune(buf[i:]) {
		t.pending = append([]byte(nil), buf[i:]...)
		buf = buf[:i]
	}
	var b strings.Builder
	for len(buf) > 0 {
		r, n := utf8.DecodeRune(buf)
		if unsafeRune(r, true) {
			if r == utf8.RuneError && n == 1 {
				fmt.Fprintf(&b, `\x%02x`, buf[0])
			} else {
				escapeRune(&b, r)
			}
		} else {
			b.Write(buf[:n])
		}
		buf = buf[n:]
	}
	if _, err := io.WriteString(t.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// lastRuneStart is the index of the start of the last rune in b, or -1.
func lastRuneStart(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	return -1
}

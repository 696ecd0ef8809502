package apierror

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Bounds on what a caller's input may become in an answer or a log line.
const (
	// MaxEcho is the most bytes of one caller-supplied value (an id, a
	// name) echoed in an error message, ErrorInfo metadata or a log line.
	MaxEcho = 64
	// MaxMessage bounds a whole message, description or metadata value.
	MaxMessage = 1024
	// MaxLogged bounds the logged text of an internal error.
	MaxLogged = 2048
	// maxViolations bounds the field violations of one answer.
	maxViolations = 100
)

// Prefix returns at most [MaxEcho] bytes of s (cut at a rune boundary),
// marked with "…" and the full length when cut. It is the one way caller
// input is shortened before it is echoed; see also [Echo].
func Prefix(s string) string {
	if len(s) <= MaxEcho {
		return s
	}
	return fmt.Sprintf("%s… (%d bytes)", cut(s, MaxEcho), len(s))
}

// Echo returns [Prefix] of s quoted as a Go string, so control characters
// and terminal escapes are shown escaped, never raw.
func Echo(s string) string {
	if len(s) <= MaxEcho {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(cut(s, MaxEcho)), len(s))
}

// bound cuts s to n bytes at a rune boundary, marking the cut.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s… (%d bytes)", cut(s, n), len(s))
}

func cut(s string, n int) string {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

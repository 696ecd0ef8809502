package diff

import (
	"strings"
	"unicode"
)

// Op is what a [Span] of a text diff is.
type Op int

// Span kinds.
const (
	// Equal text is in both versions.
	Equal Op = iota
	// Delete text is only in the old version.
	Delete
	// Insert text is only in the new version.
	Insert
)

// Span is a run of text with one [Op].
type Span struct {
	Op   Op
	Text string
}

// MaxTextTokens bounds the word-level diff: with more tokens on either
// side than this, [Text] reports the whole old text deleted and the whole
// new text inserted (the LCS table is quadratic).
const MaxTextTokens = 2000

// Text returns a word-level diff of old and new: spans in order whose
// Equal and Delete parts concatenate to old and whose Equal and Insert
// parts concatenate to new. Whitespace runs are tokens of their own, so
// the spans keep the original spacing.
func Text(old, new string) []Span {
	if old == new {
		if old == "" {
			return nil
		}
		return []Span{{Equal, old}}
	}
	a, b := tokens(old), tokens(new)
	// Trim the common prefix and suffix: most changes are local.
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	s := 0
	for s < len(a)-p && s < len(b)-p && a[len(a)-1-s] == b[len(b)-1-s] {
		s++
	}
	var out []Span
	add := func(op Op, t string) {
		if t == "" {
			return
		}
		if n := len(out); n > 0 && out[n-1].Op == op {
			out[n-1].Text += t
			return
		}
		out = append(out, Span{op, t})
	}
	add(Equal, strings.Join(a[:p], ""))
	ma, mb := a[p:len(a)-s], b[p:len(b)-s]
	if len(ma) > MaxTextTokens || len(mb) > MaxTextTokens {
		add(Delete, strings.Join(ma, ""))
		add(Insert, strings.Join(mb, ""))
	} else {
		for _, sp := range lcs(ma, mb) {
			add(sp.Op, sp.Text)
		}
	}
	add(Equal, strings.Join(a[len(a)-s:], ""))
	return group(out)
}

// group makes a diff readable: whitespace left equal between two changes
// joins them, and each run of changes becomes one deletion followed by
// one insertion ("when it last changed." → "try to repair it." rather
// than word by word).
func group(in []Span) []Span {
	var out []Span
	var del, ins strings.Builder
	flush := func() {
		if del.Len() > 0 {
			out = append(out, Span{Delete, del.String()})
		}
		if ins.Len() > 0 {
			out = append(out, Span{Insert, ins.String()})
		}
		del.Reset()
		ins.Reset()
	}
	for i, sp := range in {
		switch {
		case sp.Op == Delete:
			del.WriteString(sp.Text)
		case sp.Op == Insert:
			ins.WriteString(sp.Text)
		case i > 0 && i < len(in)-1 && strings.TrimSpace(sp.Text) == "" && in[i-1].Op != Equal && in[i+1].Op != Equal:
			del.WriteString(sp.Text)
			ins.WriteString(sp.Text)
		default:
			flush()
			out = append(out, sp)
		}
	}
	flush()
	return out
}

// tokens splits s into words and whitespace runs.
func tokens(s string) []string {
	var out []string
	start, prevSpace := 0, false
	for i, r := range s {
		space := unicode.IsSpace(r)
		if i > start && space != prevSpace {
			out = append(out, s[start:i])
			start = i
		}
		prevSpace = space
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// lcs diffs two token lists through a longest common subsequence table.
func lcs(a, b []string) []Span {
	n, m := len(a), len(b)
	t := make([][]int32, n+1)
	for i := range t {
		t[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				t[i][j] = t[i+1][j+1] + 1
			} else {
				t[i][j] = max(t[i+1][j], t[i][j+1])
			}
		}
	}
	var out []Span
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			out = append(out, Span{Equal, a[i]})
			i, j = i+1, j+1
		case i < n && (j == m || t[i+1][j] >= t[i][j+1]):
			out = append(out, Span{Delete, a[i]})
			i++
		default:
			out = append(out, Span{Insert, b[j]})
			j++
		}
	}
	return out
}

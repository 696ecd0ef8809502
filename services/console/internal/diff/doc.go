// Package diff compares two tool descriptors for a reviewer: the
// description as a word-level text diff ([Text]) and the input or output
// schema as a structural diff ([Schema]: properties added, removed or
// changed, required, types, other keywords). It is pure: no I/O, bounded
// work on hostile input.
package diff

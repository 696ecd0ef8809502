package main

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
)

// when formats a timestamp for tables, in UTC; "-" when unset.
func when(t *timestamppb.Timestamp) string {
	if t == nil {
		return "-"
	}
	return t.AsTime().UTC().Format(time.RFC3339)
}

// orDash shows an empty string as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// shortDigest abbreviates a digest for tables (`sha256:` and 12 hex digits);
// the show commands print digests whole.
func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12] + "…"
	}
	return orDash(d)
}
